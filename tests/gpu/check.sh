#!/usr/bin/env bash
# strata against a real GPU: a real PyTorch job under `strata run`, with tensors of known
# sizes, cached blocks and memory outside the pool (cuMemAlloc through ctypes); then, at one
# instant, `strata snapshot --json` beside torch.cuda.memory_stats and
# `nvidia-smi --query-compute-apps`. Fails when they disagree beyond the skew it measured.
#
# A second, one-shot snapshot after the fact cannot have seen the empty pool: its context is
# an estimate that holds the memory outside the pool too, never less than the observed one.
#
# Needs: an NVIDIA GPU, nvidia-smi, python3 with torch (CUDA). Uses $STRATA, else
# target/release/strata (built with `cargo build --release` if cargo is there).
# Then the agent's own readings (a second table): a torch job that records its memory history
# (no snapshot is taken, none leaves a mark in the job's trace), allocator settings changed at
# run time (a new hello with them), and JAX with XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
# (reserved and the largest free block null with their reason, allocated kept) when $PY has a
# CUDA jax. These read the feed socket directly.
# Then sites windows on real jobs (a third table): a job that records no history, asked for a
# window over the feed socket while it leaks from one line (that line is the top growth site
# with the bytes leaked; history off and the ring empty after; trace times are unix µs; the
# window's segment map adds up to torch's reserved), and a job that records its own history
# (left on, its entries from before the window kept, only the window's growth counted).
# Prints a table; exit status 0 when every check holds.
set -uo pipefail
cd "$(dirname "$0")/../.."
STRATA=${STRATA:-target/release/strata}
if [ ! -x "$STRATA" ]; then
  command -v cargo >/dev/null && cargo build --release --quiet || { echo "check.sh: no strata binary at $STRATA and no cargo to build it"; exit 2; }
fi
command -v nvidia-smi >/dev/null || { echo "check.sh: nvidia-smi not found: this needs a machine with an NVIDIA GPU"; exit 2; }
PY=${PYTHON:-python3}
$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null || { echo "check.sh: $PY has no CUDA-enabled torch"; exit 2; }

job=""
work=$(mktemp -d /tmp/strata-gpu-check.XXXXXX)
trap '[ -n "$job" ] && kill "$job" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
export STRATA_FEED_DIR="$work/feeds"

cat > "$work/job.py" <<'PYEOF'
import ctypes, json, os, sys, time
import torch
work = sys.argv[1]
MiB = 1 << 20
torch.cuda.init()
torch.cuda.set_device(0)
torch.cuda.synchronize()          # the context exists; the pool is still empty
open(os.path.join(work, "context-up"), "w").close()
time.sleep(4)                     # the monitor sees the context with an empty pool
live = [torch.empty(256 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]  # 1 GiB live
tmp = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")
del tmp                           # 512 MiB cached, not live
cuda = ctypes.CDLL("libcuda.so.1")
ptr = ctypes.c_uint64()
rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(300 * MiB))   # outside the pool
torch.cuda.synchronize()
stats = torch.cuda.memory_stats(0)
props = torch.cuda.get_device_properties(0)
with open(os.path.join(work, "job.json"), "w") as f:
    json.dump({"pid": os.getpid(), "cuMemAlloc": rc, "time": time.time(),
               "allocated": stats.get("allocated_bytes.all.current"),
               "reserved": stats.get("reserved_bytes.all.current"),
               "inactive_split": stats.get("inactive_split_bytes.all.current"),
               "backend": torch.cuda.get_allocator_backend(),
               "torch": torch.__version__, "uuid": str(getattr(props, "uuid", "")),
               "name": props.name}, f)
time.sleep(120)
PYEOF

"$STRATA" run -- "$PY" "$work/job.py" "$work" > "$work/job.out" 2>&1 &
job=$!
for _ in $(seq 1 600); do [ -e "$work/context-up" ] && break; sleep 0.1; done
[ -e "$work/context-up" ] || { echo "check.sh: the job did not initialise CUDA:"; cat "$work/job.out"; exit 1; }
# The monitor watches from while the pool is empty (it observes the context) until the job
# has allocated; its last sample is the one compared.
"$STRATA" snapshot --json --count 20 --interval 0.5 > "$work/snapshots.jsonl" 2> "$work/snapshot.err"
[ -s "$work/job.json" ] || { echo "check.sh: the job did not allocate:"; cat "$work/job.out"; exit 1; }
t0=$(date +%s.%N)
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$work/smi1.csv"
"$STRATA" snapshot --json > "$work/oneshot.json" 2>> "$work/snapshot.err"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$work/smi2.csv"
t1=$(date +%s.%N)
tail -n 1 "$work/snapshots.jsonl" > "$work/snapshot.json"

"$PY" - "$work" "$t0" "$t1" <<'PYEOF'
import csv, json, os, sys
work, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
MiB = 1 << 20
job = json.load(open(os.path.join(work, "job.json")))
snap = json.load(open(os.path.join(work, "snapshot.json")))
def smi(name):
    rows = {}
    for r in csv.reader(open(os.path.join(work, name))):
        if len(r) >= 2:
            rows[int(r[0])] = int(r[1].strip()) * MiB
    return rows
smi1, smi2 = smi("smi1.csv"), smi("smi2.csv")
pid = job["pid"]
procs = [p for p in snap["processes"] if p["pid"] == pid]
rows, failures = [], []
def check(what, strata, other, source, ok):
    rows.append((what, strata, other, source, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)
if not procs:
    print("strata does not list the job's pid %d; snapshot stderr:" % pid)
    print(open(os.path.join(work, "snapshot.err")).read())
    sys.exit(1)
p = procs[0]
feed = p.get("feed") or {}
layers = p["layers"]
skew = t1 - t0
stable = smi1.get(pid) == smi2.get(pid)
check("NVML used (MiB)", p["used"] // MiB if p["used"] is not None else None,
      smi1.get(pid, 0) // MiB, "nvidia-smi used_memory", stable and p["used"] is not None and abs(p["used"] - smi1.get(pid, 0)) < MiB)
check("allocated (B)", feed.get("allocated"), job["allocated"], "torch allocated_bytes.all.current", feed.get("allocated") == job["allocated"])
check("reserved (B)", feed.get("reserved"), job["reserved"], "torch reserved_bytes.all.current", feed.get("reserved") == job["reserved"])
check("live layer = 1 GiB of tensors", layers.get("live"), 1024 * MiB, "known tensor sizes", layers.get("live") == 1024 * MiB)
check("cached >= 512 MiB freed tensor", layers.get("cached"), 512 * MiB, "known free", (layers.get("cached") or 0) >= 512 * MiB)
parts = (layers.get("context") or 0) + (layers.get("outside_pool") or 0) + (feed.get("reserved") or 0)
check("context+outside+reserved = used", parts, p["used"], "exact", parts == p["used"])
# Exact either way: observed (the monitor saw the empty pool) or reported (the agent's own
# NVML reading at CUDA init, carried by its hello).
check("context source", p.get("context_source"), "observed or reported", "pool empty after init", p.get("context_source") in ("observed", "reported"))
one = json.load(open(os.path.join(work, "oneshot.json")))
op = next((q for q in one["processes"] if q["pid"] == pid), {})
one_context = (op.get("layers") or {}).get("context")
if op.get("context_source") == "reported":
    # The agent's reading reaches a monitor that meets the job late: the same split.
    check("one-shot snapshot: reported context", one_context, layers.get("context"),
          "the agent's reading at CUDA init", one_context is not None and one_context == layers.get("context"))
else:
    # Without it, an estimate after the fact holds the memory outside the pool too.
    check("one-shot snapshot: context + outside", one_context, (layers.get("context") or 0) + (layers.get("outside_pool") or 0),
          "the watching monitor's split", op.get("context_source") in ("estimated", "observed") and (one_context or 0) >= (layers.get("context") or 0))
outside = layers.get("outside_pool")
check("outside_pool >= 300 MiB cuMemAlloc", outside, 300 * MiB, "ctypes cuMemAlloc_v2", outside is not None and outside >= 300 * MiB and job["cuMemAlloc"] == 0)
check("feed status", p["feed_status"].get("state"), "fresh", "within 3 intervals", p["feed_status"].get("state") == "fresh")
gpu = next((g for g in snap["gpus"] if any(g2 == p["device_uuid"] for g2 in [g["uuid"]] + [m["uuid"] for m in g.get("mig", [])])), None)
if gpu and gpu.get("layers"):
    total = sum(v for v in gpu["layers"].values() if v is not None)
    check("GPU layers sum = total", total, gpu["memory"]["total"], "NVML total", total == gpu["memory"]["total"])
w = [max(len(str(c)) for c in col) for col in zip(*([("check", "strata", "reference", "source", "")] + rows))]
for r in [("check", "strata", "reference", "source", "")] + rows:
    print("  ".join(str(c).ljust(n) for c, n in zip(r, w)))
print("torch %s, backend %s, %s; snapshot and nvidia-smi taken within %.2f s; job's pool static since %.1f s before"
      % (job["torch"], job["backend"], job["name"], skew, t0 - job["time"]))
sys.exit(1 if failures else 0)
PYEOF
status=$?

# -- the agent's readings ------------------------------------------------------------------
cat > "$work/agent_jobs.py" <<'PYEOF'
import json, os, sys, time
kind, work = sys.argv[1], sys.argv[2]
MiB = 1 << 20
def done(**kw):
    kw["pid"] = os.getpid()
    json.dump(kw, open(os.path.join(work, kind + ".json"), "w"))
    time.sleep(8)
if kind == "history":
    import torch
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=100000)
    keep = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
    del keep[1]
    def snaps():
        return sum(1 for t in torch.cuda.memory._snapshot()["device_traces"][0] if t.get("action") == "snapshot")
    first = snaps()
    time.sleep(8)              # many agent ticks; a snapshot of its own would show here
    done(new_snapshot_events=snaps() - first - 1)   # the job's own second call adds one
elif kind == "settings":
    import torch
    x = torch.empty(MiB, device="cuda")
    time.sleep(2)
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    if setter is None or getter is None:
        # No way to change them at run time that torch then says: nothing to check.
        done(skipped="torch %s has no _accelerator_setAllocatorSettings" % torch.__version__)
    else:
        setter("garbage_collection_threshold:0.6")
        done(settings=getter())
elif kind == "cuda_async":
    import jax, jax.numpy as jnp
    x = jnp.ones((64 * MiB,), dtype=jnp.uint8).block_until_ready()
    st = jax.local_devices()[0].memory_stats()
    done(bytes_in_use=st.get("bytes_in_use"))
PYEOF
cat > "$work/agent_read.py" <<'PYEOF'
import json, os, socket, sys, time
sock, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.connect(sock); s.settimeout(0.5)
buf, end = b"", time.time() + seconds
while time.time() < end:
    try:
        data = s.recv(65536)
    except socket.timeout:
        continue
    if not data:
        break
    buf += data
for line in buf.split(b"\n"):
    if line:
        print(line.decode())
PYEOF
agent_run() {  # agent_run KIND [ENV...]: the job under strata run, its feed read for 10 s
  local kind=$1; shift
  rm -f "$work/$kind.json"
  env "$@" "$STRATA" run -- "$PY" "$work/agent_jobs.py" "$kind" "$work" > "$work/$kind.out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do [ -S "$STRATA_FEED_DIR/$pid.sock" ] && break; sleep 0.1; done
  "$PY" "$work/agent_read.py" "$STRATA_FEED_DIR/$pid.sock" 14 > "$work/$kind.feed" 2>/dev/null
  wait "$pid"
}
agent_run history
agent_run settings
[ -s "$work/settings.json" ] || { echo "check.sh: the settings job wrote nothing; its last words:"; tail -5 "$work/settings.out"; }
jax_cuda=0
"$PY" -c 'import jax, sys; sys.exit(0 if any(d.platform == "gpu" for d in jax.devices()) else 1)' 2>/dev/null && jax_cuda=1
[ "$jax_cuda" = 1 ] && agent_run cuda_async XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async XLA_PYTHON_CLIENT_PREALLOCATE=false

"$PY" - "$work" "$jax_cuda" <<'PYEOF'
import json, os, sys
work, jax_cuda = sys.argv[1], sys.argv[2] == "1"
rows, failures = [], []
def check(what, got, want, ok):
    rows.append((what, got, want, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)
def feed(kind):
    try:
        return [json.loads(l) for l in open(os.path.join(work, kind + ".feed")) if l.strip()]
    except OSError:
        return []
def job(kind):
    try:
        return json.load(open(os.path.join(work, kind + ".json")))
    except (OSError, ValueError):
        return {}
hist = feed("history")
notes = [m.get("note") or "" for m in hist if m["type"] == "hello"]
check("history: no snapshot, said in the hello", any("records its memory history" in n for n in notes), True,
      any("records its memory history" in n for n in notes))
check("history: agent's events in the job's trace", job("history").get("new_snapshot_events"), 0,
      job("history").get("new_snapshot_events") == 0)
sett = feed("settings")
confs = [(m.get("settings") or {}).get("alloc_conf") for m in sett if m["type"] == "hello"]
want = job("settings").get("settings")
if job("settings").get("skipped"):
    rows.append(("settings changed at run time", "skipped: " + job("settings")["skipped"], "", ""))
else:
    # A job that wrote nothing failed: settings.out says why.
    check("settings changed at run time: a new hello", confs[-1] if confs else None, want or "(the job wrote nothing)", bool(want) and want in confs)
if jax_cuda:
    ca = [m for m in feed("cuda_async") if m["type"] == "sample"]
    d = ca[-1]["devices"][0] if ca else {}
    check("cuda_async: reserved null with its reason", d.get("unreported", {}).get("reserved"),
          "not reported by XLA's cuda_async allocator", d.get("reserved") is None and "cuda_async" in d.get("unreported", {}).get("reserved", ""))
    check("cuda_async: allocated kept", d.get("allocated"), job("cuda_async").get("bytes_in_use"),
          d.get("allocated") is not None and d.get("allocated") >= 64 * (1 << 20))
    check("cuda_async: largest free block null", d.get("largest_free_block"), None, "largest_free_block" in d and d.get("largest_free_block") is None)
else:
    rows.append(("cuda_async", "skipped: no CUDA jax in " + sys.executable, "", ""))
w = [max(len(str(c)) for c in col) for col in zip(*([("agent check", "got", "want", "")] + rows))]
for r in [("agent check", "got", "want", "")] + rows:
    print("  ".join(str(c).ljust(n) for c, n in zip(r, w)))
sys.exit(1 if failures else 0)
PYEOF
agent_status=$?

# -- sites windows on real jobs ------------------------------------------------------------
cat > "$work/sites_job.py" <<'PYEOF'
import json, os, sys, time
import torch
kind, work = sys.argv[1], sys.argv[2]
MiB = 1 << 20
def flag(name):
    open(os.path.join(work, "%s-%s" % (kind, name)), "w").close()
def wait(name):
    path = os.path.join(work, "%s-%s" % (kind, name))
    end = time.time() + 120
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.01)
def line_of(marker):
    return [i for i, l in enumerate(open(__file__), 1) if marker in l and "append" in l][0]
torch.cuda.init()
torch.cuda.set_device(0)
out = {"pid": os.getpid(), "file": os.path.abspath(__file__), "torch": torch.__version__}
if kind == "ownhist":
    torch.cuda.memory._record_memory_history(context="alloc", max_entries=50000)
early = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(2)]
torch.cuda.synchronize()
flag("ready")
wait("running")
leaked = []
for i in range(8):
    leaked.append(torch.empty(32 * MiB, dtype=torch.uint8, device="cuda"))  # SITES-LEAK
    for _ in range(200):
        t = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        del t
torch.cuda.synchronize()
out["leak_line"] = line_of("SITES-LEAK")
out["reserved"] = torch.cuda.memory_reserved(0)
out["allocated"] = torch.cuda.memory_allocated(0)
wait("done")
out["history_after"] = torch._C._cuda_isHistoryEnabled()
snap = torch.cuda.memory._snapshot()
trace = snap["device_traces"][0] if snap["device_traces"] else []
out["trace_after"] = len(trace)
out["now_us"] = time.time() * 1e6
out["last_time_us"] = trace[-1].get("time_us") if trace else None
out["early_allocs_in_trace"] = sum(1 for e in trace if e.get("action") == "alloc" and e.get("size") == 64 * MiB)
json.dump(out, open(os.path.join(work, kind + ".json"), "w"))
time.sleep(4)
PYEOF
cat > "$work/sites_read.py" <<'PYEOF'
import json, os, socket, sys, time
sock, work, kind = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX); s.connect(sock); s.settimeout(0.2)
buf, msgs, end, asked = b"", [], time.time() + 90, False
running = done = None
while time.time() < end:
    sampled = any(m.get("type") == "sample" and m.get("devices") for m in msgs)
    if not asked and sampled and os.path.exists(os.path.join(work, kind + "-ready")):
        s.sendall(b'{"v":1,"type":"sites_request","id":42,"seconds":4,"top":10}\n')
        asked = True
    try:
        data = s.recv(65536)
    except socket.timeout:
        data = None
    if data == b"":
        break
    if data:
        buf += data
        *lines, buf = buf.split(b"\n")
        for l in lines:
            m = json.loads(l)
            msgs.append(m)
            if m.get("type") == "sites" and m.get("id") == 42:
                if m["state"] == "running":
                    open(os.path.join(work, kind + "-running"), "w").close()
                elif m["state"] in ("done", "failed", "refused"):
                    done = m
                    open(os.path.join(work, kind + "-running"), "w").close()
    if done is not None and any(m.get("type") == "segments" and m.get("time") == done.get("time") for m in msgs):
        break
    if done is not None and done["state"] != "done":
        break
open(os.path.join(work, kind + "-done"), "w").close()
with open(os.path.join(work, kind + ".feed"), "w") as f:
    for m in msgs:
        f.write(json.dumps(m) + "\n")
PYEOF
sites_run() {  # sites_run KIND: the job under strata run, a window asked over its socket
  local kind=$1
  rm -f "$work/$kind".json "$work/$kind"-ready "$work/$kind"-running "$work/$kind"-done
  "$STRATA" run -- "$PY" "$work/sites_job.py" "$kind" "$work" > "$work/$kind.out" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do [ -S "$STRATA_FEED_DIR/$pid.sock" ] && break; sleep 0.1; done
  "$PY" "$work/sites_read.py" "$STRATA_FEED_DIR/$pid.sock" "$work" "$kind" 2>> "$work/$kind.out"
  wait "$pid"
}
sites_run agenthist
sites_run ownhist

"$PY" - "$work" <<'PYEOF'
import json, os, sys
work = sys.argv[1]
MiB = 1 << 20
rows, failures = [], []
def check(what, got, want, ok):
    rows.append((what, got, want, "ok" if ok else "FAIL"))
    if not ok:
        failures.append(what)
def load(kind):
    try:
        job = json.load(open(os.path.join(work, kind + ".json")))
    except (OSError, ValueError):
        job = {}
    try:
        feed = [json.loads(l) for l in open(os.path.join(work, kind + ".feed")) if l.strip()]
    except OSError:
        feed = []
    done = next((m for m in feed if m.get("type") == "sites" and m.get("id") == 42 and m.get("state") != "running"), {})
    segs = next((m for m in feed if m.get("type") == "segments" and m.get("time") == done.get("time")), {})
    return job, done, segs
for kind, history in (("agenthist", "agent"), ("ownhist", "job")):
    job, done, segs = load(kind)
    check(kind + ": window done", done.get("state"), "done (" + str(done.get("reason")) + ")", done.get("state") == "done")
    if done.get("state") != "done":
        continue
    check(kind + ": history", done.get("history"), history, done.get("history") == history)
    dev = next((d for d in done.get("devices", []) if d["index"] == 0), {})
    top = (dev.get("growth") or [{}])[0]
    site = "%s:%s in <module>" % (job.get("file"), job.get("leak_line"))
    check(kind + ": top growth site", top.get("site"), site, top.get("site") == site)
    check(kind + ": its bytes", top.get("bytes"), 8 * 32 * MiB, top.get("bytes") == 8 * 32 * MiB)
    check(kind + ": churn not growth", dev.get("growth_bytes"), 8 * 32 * MiB, dev.get("growth_bytes") == 8 * 32 * MiB)
    check(kind + ": dropped", done.get("dropped"), 0, done.get("dropped") == 0)
    c = done.get("cost") or {}
    rows.append((kind + ": cost", "cpu %.1f ms, gil_max %.2f ms, snapshot %.1f ms, %d entries"
                 % (1e3 * (c.get("cpu") or 0), 1e3 * (c.get("gil_max") or 0), 1e3 * (c.get("snapshot") or 0),
                    done.get("entries") or 0), "measured", ""))
    pools = next((d["pools"] for d in segs.get("devices", []) if d["index"] == 0), [])
    check(kind + ": segment map reserved", sum(p["reserved"] for p in pools), job.get("reserved"),
          sum(p["reserved"] for p in pools) == job.get("reserved"))
    check(kind + ": segment map live", sum(p["live"] for p in pools), job.get("allocated"),
          sum(p["live"] for p in pools) == job.get("allocated"))
    if history == "agent":
        check("agenthist: history off after", job.get("history_after"), False, job.get("history_after") is False)
        check("agenthist: ring empty after", job.get("trace_after"), 0, job.get("trace_after") == 0)
        check("agenthist: earlier blocks unattributed", dev.get("live_unattributed"), 2 * 64 * MiB,
              dev.get("live_unattributed") == 2 * 64 * MiB)
    else:
        check("ownhist: history still on", job.get("history_after"), True, job.get("history_after") is True)
        check("ownhist: its earlier entries kept", job.get("early_allocs_in_trace"), 2, job.get("early_allocs_in_trace") == 2)
        # The window is cut from the job's trace by time_us, taken as unix microseconds.
        check("ownhist: trace time is unix us", job.get("last_time_us"), "within 10 s of time.time()",
              job.get("last_time_us") is not None and abs(job["last_time_us"] - job["now_us"]) < 10e6)
w = [max(len(str(c)) for c in col) for col in zip(*([("sites check", "got", "want", "")] + rows))]
for r in [("sites check", "got", "want", "")] + rows:
    print("  ".join(str(c).ljust(n) for c, n in zip(r, w)))
sys.exit(1 if failures else 0)
PYEOF
sites_status=$?
[ "$status" -eq 0 ] && [ "$agent_status" -eq 0 ] && [ "$sites_status" -eq 0 ]
