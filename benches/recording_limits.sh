#!/usr/bin/env bash
# What hostile recordings cost `strata analyze`: wall time, peak resident memory and exit
# status (with the first line of stderr) for two lines of 300 MB (over the 256 MiB line limit; one begins as a sample does, one is junk) between two samples, /dev/zero,
# a gzip bomb of zeros (33 MB of gzip members, 32 GiB of zeros), a zstd recording of 122 samples in
# two frames with the first damaged mid-frame, and the same recompressed with
# `zstd --long=31`. Runs without a cap but /dev/zero and the bomb, under 4 GiB of address
# space and 120 s (an unbounded reader grows until one of them stops it).
# Usage: benches/recording_limits.sh [STRATA]   (default target/release/strata)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/strata}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 1; }
dir=$(mktemp -d /tmp/strata-bench-limits.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$bin" snapshot --demo --demo-at 0 --demo-speed 1 --json --count 122 --interval 10 >"$dir/demo.jsonl"
head -1 "$dir/demo.jsonl" >"$dir/line.jsonl"
# One that begins as a sample does ({"pad": "xxx...), then one of junk.
{ cat "$dir/line.jsonl"; printf '{"pad": "'; head -c 300000000 /dev/zero | tr '\0' x; printf '"}\n'
  head -c 300000000 /dev/zero | tr '\0' y; echo; sed -n 2p "$dir/demo.jsonl"; } >"$dir/long-line.jsonl"
# 512 gzip members of 64 MiB of zeros each, one after another (as appending writes them).
head -c 67108864 /dev/zero | gzip -9 >"$dir/member.gz"
for _ in $(seq 512); do cat "$dir/member.gz"; done >"$dir/bomb.gz"
head -61 "$dir/demo.jsonl" | zstd -q -c >"$dir/damaged.zst"
first=$(stat -c %s "$dir/damaged.zst")
tail -n +62 "$dir/demo.jsonl" | zstd -q -c >>"$dir/damaged.zst"
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of="$dir/damaged.zst" bs=1 seek=$((first / 2)) conv=notrunc status=none
zstd -q --long=31 -c <"$dir/demo.jsonl" >"$dir/long31.zst"
echo "inputs: $(du -h "$dir/long-line.jsonl" | cut -f1) line file, $(du -h "$dir/bomb.gz" | cut -f1) gzip bomb"
measure() {
  local name=$1; shift
  /usr/bin/time -f '%e %M' -o "$dir/time" "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  read -r wall rss < <(tail -1 "$dir/time") || { wall=?; rss=?; }
  local said
  said=$(grep -v '^Command ' "$dir/err" | head -1 | cut -c1-150)
  local samples
  samples=$(head -1 "$dir/out" | cut -c1-60)
  printf '%-14s exit %-3s %6s s %8s KiB  %s | %s\n' "$name" "$rc" "$wall" "$rss" "$samples" "$said"
}
measure "300 MB lines" "$bin" analyze "$dir/long-line.jsonl"
measure "/dev/zero" timeout 120 prlimit --as=4294967296 "$bin" analyze /dev/zero
measure "gzip bomb" timeout 120 prlimit --as=4294967296 "$bin" analyze "$dir/bomb.gz"
measure "damaged zstd" "$bin" analyze "$dir/damaged.zst"
measure "zstd --long=31" "$bin" analyze "$dir/long31.zst"
