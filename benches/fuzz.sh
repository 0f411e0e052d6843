#!/usr/bin/env bash
# Runs one fuzz target under AFL++ (cargo-afl, stable Rust) for a stated time, niced, on one
# core, from its corpus in fuzz/corpus/TARGET; prints AFL's closing figures (executions,
# paths, crashes, hangs). Crashes and hangs land in fuzz/out/TARGET/default/{crashes,hangs}:
# fix them, then copy each crashing input into fuzz/corpus/TARGET so that `cargo test --test
# fuzz_corpus` replays it from then on.
# Usage: benches/fuzz.sh TARGET SECONDS   (targets: recording_reader, analyze, feed_line,
# hello_trust, http)
# Needs: cargo install cargo-afl; cargo afl config --build (AFL++ for this toolchain).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
target=${1:?usage: benches/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: benches/fuzz.sh TARGET SECONDS}
[ -d "corpus/$target" ] || { echo "no corpus/$target" >&2; exit 2; }
command -v cargo-afl >/dev/null || { echo "cargo-afl missing: cargo install cargo-afl && cargo afl config --build" >&2; exit 1; }
nice -n 10 cargo afl build --release --bin "$target" -q
mkdir -p "out/$target"
# A reading that takes 2 s is a hang; a bomb in the input is read in bounded pieces.
AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
AFL_AUTORESUME=1 \
  nice -n 10 cargo afl fuzz -i "corpus/$target" -o "out/$target" -t 2000 -m none \
  -V "$seconds" "target/release/$target" >"out/$target/log" 2>&1 || true
stats="out/$target/default/fuzzer_stats"
[ -f "$stats" ] || { tail -20 "out/$target/log" >&2; exit 1; }
grep -E '^(run_time|execs_done|execs_per_sec|corpus_count|saved_crashes|saved_hangs|stability|bitmap_cvg)' "$stats"
ls "out/$target/default/crashes" 2>/dev/null | grep -v README || true
