#!/usr/bin/env python3
"""strata fleet against a Prometheus holding a fleet larger than this machine can run.

For each size N (nodes x 8 GPUs x 8 processes) this writes an OpenMetrics file in the
series shape `strata serve` writes (plus `instance`, `job="strata"` and `up`, as Prometheus
would add them), loads it with `promtool tsdb create-blocks-from openmetrics`, starts
Prometheus on it (scraping two live `strata serve --demo` targets as well) and measures:

- `strata fleet --prometheus URL --json`: wall time, CPU and peak RSS (/usr/bin/time -v),
  the median of --runs runs, and the CPU Prometheus spent while each ran (the median),
  each run started between two evaluations of the rules and ended before the next, so
  that an evaluation (many seconds of a core at 1000 nodes) is not counted as a read's;
- what one refresh makes Prometheus touch: every query the fleet sends goes once through a
  proxy that adds `stats=all`, and the proxy sums `totalQueryableSamples`, `peakSamples`
  and the series of each answer;
- with --first-frame RUNS, the screen's first frame: `strata fleet --prometheus URL` under
  tmux at 120x40, the seconds from its start to the first frame whose header names the
  nodes read (the pane polled every 20 ms), each run whenever it comes, rule evaluations
  or not, as a user opens the screen.

A job of 512 ranks (`slurm_job="9001"`, 8 a node on the first 64 nodes) has one rank whose
live layer climbs (its node exports the climb); every other process belongs to a job of 8
ranks on its own node. `strata_node_info` and `up` cover the hour (the fleet's
`max_over_time(...[1h])` reads it); the other series cover the last --history seconds
(default 300: an instant query reads one sample a series, so a longer history changes no
figure measured here, only the file's size, 20 GB at 1000 nodes for the full hour).

Backfilled samples end a minute before the bench starts and stay put while it runs, so
Prometheus runs with `--query.lookback-delta=15m` and the fleet with `--scrape-interval
300`: both would otherwise call the backfilled nodes stale within a minute.

    cargo build && python3 benches/fleet_scale.py --nodes 10,100,1000
    python3 benches/fleet_scale.py --nodes 1000 --strata target/debug/strata --strata /tmp/old-strata
    python3 benches/fleet_scale.py --nodes 100 --keep /tmp/fleet100   # keep the data and JSON
"""

import argparse
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

GPUS = 8
PROCS = 8
STEP = 15
HOUR = 3600
JOB_NODES = 64
JOB = "9001"
LEAK_NODE, LEAK_GPU = 3, 5  # rank 29: on a node every size has
TOTAL = 85520809984
GIB = 1 << 30
MIB = 1 << 20
# A device's layers, fixed shares of its total (they add up to it).
DEVICE_LAYERS = [
    ("context", 4 * 560 * MIB),
    ("outside_pool", 8 * 235 * MIB),
    ("live", 40 * GIB),
    ("fragmented", 2 * GIB),
    ("cached", 10 * GIB),
    ("unattributed", 0),
    ("other", 546308096),
]
PROCESS_LAYERS = ["live", "fragmented", "cached", "outside_pool", "context"]


def labels(pairs):
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def node_name(n):
    return f"node-{n:04d}"


def instance(n):
    return f"{node_name(n)}:9842"


def uuid(n, g):
    return f"GPU-{n:08x}-0000-4000-8000-{g:012x}"


def process_of(n, g, p):
    """The owner labels of process p on node n, GPU g (strata serve's order)."""
    pid = 40000 + g * PROCS + p
    if p == 0 and n < JOB_NODES:
        job, rank, world = JOB, n * GPUS + g, 512
        command = f"python train.py --config llama-70b.yaml --rank {rank}"
    else:
        # Each node's other processes: 7 jobs of 8 ranks, one a GPU.
        job, rank, world = str(20000 + n * PROCS + p), g, GPUS
        command = f"python finetune.py --shard {p} --rank {rank}"
    return [
        ("gpu", str(g)),
        ("uuid", uuid(n, g)),
        ("pid", str(pid)),
        ("user", "mlteam"),
        ("command", command),
        ("namespace", ""),
        ("pod", ""),
        ("container", ""),
        ("slurm_job", job),
        ("rank", str(rank)),
        ("local_rank", str(g)),
        ("world_size", str(world)),
        ("run", ""),
    ]


def leaks(n, g, p):
    return (n, g, p) == (LEAK_NODE, LEAK_GPU, 0)


def spread(n, g):
    """A device's cached bytes above the fixed share: 0 to 999 MiB, apart for each of the
    first 1000 devices."""
    return (n * GPUS + g) * 919 % 1000 * MIB


def write_openmetrics(path, nodes, end, history, stale=0):
    """The fleet's series, one sample every STEP seconds, the last at `end`; the first
    `stale` nodes' samples 10,000 s old (the fleet shows them stale)."""
    full = [end - HOUR + STEP * (i + 1) for i in range(HOUR // STEP)]
    tail = [t for t in full if t > end - history]
    leak_start = end - HOUR
    rate = 80 * MIB / 60  # live +80 MiB/min

    def family(name, kind="gauge"):
        out.write(f"# TYPE {name} {kind}\n")

    def samples(name, pairs, value, times):
        head = f"{name}{labels(pairs)} "
        if callable(value):
            out.write("".join(f"{head}{value(t)} {t}\n" for t in times))
        else:
            out.write("".join(f"{head}{value} {t}\n" for t in times))

    def base(n):
        return [("instance", instance(n)), ("job", "strata")]

    with open(path, "w") as out:
        family("up")
        for n in range(nodes):
            samples("up", base(n), 1, full)
        family("strata_node_info")
        for n in range(nodes):
            pairs = [
                ("host", node_name(n)),
                ("driver_version", "550.90.07"),
                ("cuda_driver_version", "12.4"),
                ("version", "0.1.0"),
                ("exports", "device_findings"),
            ] + base(n)
            samples("strata_node_info", pairs, 1, full)
        family("strata_sample_interval_seconds")
        for n in range(nodes):
            samples("strata_sample_interval_seconds", base(n), 1.0, tail)
        family("strata_sample_age_seconds")
        for n in range(nodes):
            samples("strata_sample_age_seconds", base(n), 10000 if n < stale else 0.5, tail)
        name = "NVIDIA H100 80GB HBM3"
        family("strata_gpu_memory_total_bytes")
        for n in range(nodes):
            for g in range(GPUS):
                pairs = [("gpu", str(g)), ("uuid", uuid(n, g)), ("name", name)] + base(n)
                samples("strata_gpu_memory_total_bytes", pairs, TOTAL, tail)
        family("strata_gpu_layer_bytes")
        for n in range(nodes):
            for g in range(GPUS):
                dev = [("gpu", str(g)), ("uuid", uuid(n, g)), ("name", name)]
                # Each device's cache a little apart (taken from its free memory), so that
                # no two devices of a fleet under 1000 GPUs are equally full.
                layers = [(k, b + (spread(n, g) if k == "cached" else 0)) for k, b in DEVICE_LAYERS]
                used = sum(b for _, b in layers)
                for layer, b in layers + [("free", TOTAL - used)]:
                    samples("strata_gpu_layer_bytes", dev + [("layer", layer)] + base(n), b, tail)
        def process_samples(name, pairs, value, leaking, times):
            """A process's series: `value` over the tail, or, where it leaks, climbing at
            `rate` from the hour's start over `times`."""
            if leaking:
                samples(name, pairs, lambda t, v=value: int(v + rate * (t - leak_start)), times)
            else:
                samples(name, pairs, value, tail)

        family("strata_process_used_bytes")
        for n in range(nodes):
            for g in range(GPUS):
                for p in range(PROCS):
                    used = (5 + p) * GIB + 1879048192 + 557842432
                    pairs = process_of(n, g, p) + base(n)
                    process_samples("strata_process_used_bytes", pairs, used, leaks(n, g, p), tail)

        def process_layers(p):
            return {
                "live": 3 * GIB + p * 128 * MIB,
                "fragmented": 256 * MIB,
                "cached": 2 * GIB - 256 * MIB + p * 896 * MIB,
                "outside_pool": 1879048192,
                "context": 557842432,
            }

        family("strata_process_layer_bytes")
        for n in range(nodes):
            for g in range(GPUS):
                for p in range(PROCS):
                    owner = process_of(n, g, p)
                    layers = process_layers(p)
                    for layer in PROCESS_LAYERS:
                        pairs = owner + [("layer", layer)] + base(n)
                        leaking = leaks(n, g, p) and layer == "live"
                        process_samples("strata_process_layer_bytes", pairs, layers[layer], leaking, full)
        # The allocator's pool, as strata serve exports it beside the layers.
        family("strata_process_reserved_bytes")
        for n in range(nodes):
            for g in range(GPUS):
                for p in range(PROCS):
                    pairs = process_of(n, g, p) + base(n)
                    layers = process_layers(p)
                    pool = layers["live"] + layers["fragmented"] + layers["cached"]
                    process_samples("strata_process_reserved_bytes", pairs, pool, leaks(n, g, p), full)
        # The findings that name a device, a few forecasts, and the one live climb.
        family("strata_device_findings")
        climb_start = end - 30 * 60
        finding_times = [t for t in full if t >= climb_start]
        marked = [
            (LEAK_NODE, LEAK_GPU, "climb", "warning"),
            (LEAK_NODE, LEAK_GPU, "oom_forecast", "warning"),
            (2, 0, "zombie_context", "critical"),
            (8, 7, "fragmentation", "warning"),
        ]
        # And fragmentation on one device in 17, more than a window of 20 rows holds.
        marked += [
            (n, g, "fragmentation", "warning")
            for n in range(nodes)
            for g in range(GPUS)
            if (n * GPUS + g) % 17 == 5 and (n, g) != (8, 7)
        ]
        for n, g, kind, severity in marked:
            if n < nodes:
                pairs = [("gpu", str(g)), ("uuid", uuid(n, g)), ("kind", kind), ("severity", severity)]
                samples("strata_device_findings", pairs + base(n), 1, finding_times)
        family("strata_oom_forecast_seconds")
        forecasts = [(LEAK_NODE, LEAK_GPU, 0), (1, 2, 3), (6, 2, 3), (9, 2, 3)]
        for n, g, p in forecasts:
            if n < nodes:
                owner = process_of(n, g, p)
                pairs = owner[:3] + owner[3:5] + base(n)
                eta = 2400 if (n, g) != (LEAK_NODE, LEAK_GPU) else 1500
                samples(
                    "strata_oom_forecast_seconds",
                    pairs,
                    lambda t, e=eta: max(60, e - (t - climb_start) / 4),
                    finding_times,
                )
        family("strata_climb_rate_bytes_per_second")
        for n, g, p in forecasts:
            if n < nodes:
                owner = process_of(n, g, p)
                cause = "live" if leaks(n, g, p) else "cached"
                pairs = owner[:5] + [("series", "allocated"), ("cause", cause)] + base(n)
                samples("strata_climb_rate_bytes_per_second", pairs, rate, finding_times)
        out.write("# EOF\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, within=120):
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"fleet_scale: {what} not ready within {within} s")


def start_prometheus(config, data, port, log):
    """Prometheus on the backfilled `data` with `config`, listening on `port`, its log in
    `log`: samples kept 30 days and looked back on 15 minutes, so that the backfill, which
    ends a minute before the bench and then stays put, is current for that long."""
    return subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=30d",
            "--query.lookback-delta=15m",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "w"),
    )


def get_json(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return json.load(r)


def seconds_of(rfc3339):
    """A Prometheus API timestamp (RFC 3339, nanoseconds) in seconds since the epoch."""
    day, _, rest = rfc3339.rstrip("Z").partition("T")
    clock, _, fraction = rest.partition(".")
    whole = time.mktime(time.strptime(f"{day}T{clock}", "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return whole + (float(f"0.{fraction}") if fraction else 0.0)


def rules_quiet_for(base):
    """Seconds until the next rule evaluation starts, where none runs now; 0 where one runs
    or is due. A group's lastEvaluation is when its last finished evaluation started: while
    the next one runs, it is a whole interval old."""
    now = time.time()
    left = float("inf")
    for g in get_json(f"{base}/api/v1/rules")["data"]["groups"]:
        last = seconds_of(g["lastEvaluation"])
        if now < last + g.get("evaluationTime", 0) + 0.5 or now >= last + g["interval"]:
            return 0.0
        left = min(left, last + g["interval"] - now)
    return left


def timed_read(cmd, prom, base, budget):
    """One timed read and the CPU Prometheus spent while it ran, taken between two rule
    evaluations: an evaluation of the rules at 1000 nodes holds a core for many seconds,
    and a read that overlapped one would count it as the read's. Where the rules are
    evaluated more often than twice the budget (the tests' 2 s), there is no such gap: the
    read is taken at once, and Prometheus's CPU counts whatever it evaluated meanwhile."""
    groups = get_json(f"{base}/api/v1/rules")["data"]["groups"]
    if any(g["interval"] < 2 * budget for g in groups):
        before = process_cpu(prom.pid)
        run = time_v(cmd)[1:]
        return run, process_cpu(prom.pid) - before
    for _ in range(20):
        wait_for("a gap between rule evaluations", lambda: rules_quiet_for(base) >= budget, within=600)
        start, before = time.time(), process_cpu(prom.pid)
        left = rules_quiet_for(base)
        run = time_v(cmd)[1:]
        cpu = process_cpu(prom.pid) - before
        if left >= budget and time.time() < start + left:
            return run, cpu
    sys.exit("fleet_scale: no read fell between two rule evaluations")


class Stats:
    """What the queries of one refresh made Prometheus touch, summed."""

    def __init__(self):
        self.queries = []
        self.lock = threading.Lock()


def proxy(upstream, stats):
    """An HTTP proxy to Prometheus that asks each query with stats=all and keeps them."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            self.forward(url.path, urllib.parse.parse_qsl(url.query), None)

        def do_POST(self):
            # A long query comes as a form (the fleet posts those).
            length = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qsl(self.rfile.read(length).decode())
            self.forward(urllib.parse.urlsplit(self.path).path, form, "POST")

        def forward(self, path, query, method):
            query.append(("stats", "all"))
            conn = http.client.HTTPConnection(upstream, timeout=300)
            if method == "POST":
                conn.request(
                    "POST",
                    path,
                    body=urllib.parse.urlencode(query),
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
            else:
                conn.request("GET", path + "?" + urllib.parse.urlencode(query))
            r = conn.getresponse()
            body = r.read()
            try:
                v = json.loads(body)
                samples = v["data"].get("stats", {}).get("samples", {})
                promql = dict(query).get("query", "")
                with stats.lock:
                    stats.queries.append(
                        (
                            promql,
                            len(v["data"]["result"]),
                            samples.get("totalQueryableSamples", 0),
                            samples.get("peakSamples", 0),
                        )
                    )
            except (ValueError, KeyError, TypeError):
                pass
            self.send_response(r.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def time_v(cmd):
    """Runs cmd under /usr/bin/time -v: (stdout, wall s, cpu s, peak RSS KiB)."""
    start = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if r.returncode != 0:
        sys.exit(f"fleet_scale: {' '.join(cmd)} failed: {r.stderr[-2000:]}")

    def field(name):
        m = re.search(rf"{re.escape(name)}: ([0-9.]+)", r.stderr)
        return float(m.group(1)) if m else 0.0

    cpu = field("User time (seconds)") + field("System time (seconds)")
    return r.stdout, wall, cpu, field("Maximum resident set size (kbytes)")


def process_cpu(pid):
    """A process's user + system CPU seconds so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def comparable(fleet):
    """The JSON less what moves between two reads: the read's time, the ages, and the
    live demo targets (they run on)."""
    fleet = dict(fleet)
    fleet.pop("time", None)
    fleet.pop("source", None)
    nodes = [dict(n) for n in fleet["nodes"] if not n["instance"].startswith("127.0.0.1")]
    for n in nodes:
        n.pop("age_secs", None)
    fleet["nodes"] = nodes
    # The live targets' jobs: the demo's Slurm job and its pods (the backfill names none).
    fleet["jobs"] = [
        j for j in fleet["jobs"] if j["key"] != "slurm 81234" and not j["key"].startswith("pod ")
    ]
    return fleet


def first_frames(cmd, runs):
    """Seconds from the start of `cmd` under tmux (120x40) to the first frame whose header
    names the nodes read, for each of `runs` runs."""
    out = []
    for i in range(runs):
        sock = f"strata-first-frame-{os.getpid()}-{i}"
        tmux = ["tmux", "-L", sock]
        start = time.monotonic()
        subprocess.run(tmux + ["new-session", "-d", "-x", "120", "-y", "40", " ".join(cmd)], check=True)
        try:
            while True:
                pane = subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True, text=True).stdout
                header = pane.splitlines()[0] if pane else ""
                if header.startswith("strata fleet · ") and " nodes: " in header:
                    out.append(time.monotonic() - start)
                    break
                if time.monotonic() - start > 120:
                    sys.exit(f"fleet_scale: no first frame in 120 s; the pane:\n{pane}")
                time.sleep(0.02)
        finally:
            subprocess.run(tmux + ["kill-server"], capture_output=True)
    return out


def bench(n, args, work):
    data = os.path.join(work, "data")
    om = os.path.join(work, "fleet.om")
    end = int(time.time()) - 60
    t0 = time.monotonic()
    write_openmetrics(om, n, end, args.history, args.stale)
    size = os.path.getsize(om)
    t1 = time.monotonic()
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", om, data],
        check=True,
        capture_output=True,
    )
    t2 = time.monotonic()
    if not args.keep:
        os.remove(om)
    print(
        f"# {n} nodes: {size / 1e6:.0f} MB of OpenMetrics in {t1 - t0:.0f} s, blocks in {t2 - t1:.0f} s",
        file=sys.stderr,
    )
    demo_ports = [free_port(), free_port()]
    demos = [
        subprocess.Popen(
            [args.strata[0], "serve", "--demo", "--demo-seed", str(i + 1), "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i, port in enumerate(demo_ports)
    ]
    port = free_port()
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        targets = ", ".join(f'"127.0.0.1:{p}"' for p in demo_ports)
        rules = "".join(f"\n  - {os.path.abspath(r)}" for r in args.rules)
        f.write(
            f"global:\n  scrape_interval: 15s\n  evaluation_interval: {args.evaluation_interval}\n"
            + (f"rule_files:{rules}\n" if rules else "")
            + f"scrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets: [{targets}]\n"
        )
    prom = start_prometheus(config, data, port, os.path.join(work, "prometheus.log"))
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        wait_for("Prometheus", lambda: urllib.request.urlopen(base + "/-/ready", timeout=5).status == 200)
        q = urllib.parse.quote('count(up{job="strata"} == 1) >= %d' % (n + 2))
        wait_for("the live targets' first scrape", lambda: get_json(f"{base}/api/v1/query?query={q}")["data"]["result"])
        if args.rules:
            # The group's first and last rules, the last over the live targets too: the whole
            # group evaluated once since their first scrape (an evaluation before it would
            # leave their jobs out of the recorded spread, and the read would not be the
            # raw one's).
            q = urllib.parse.quote(
                "count(strata_job:figures:spread) > 0 and on() "
                'count(count by (instance) (strata_device:used:ratio{instance=~"127\\\\.0\\\\.0\\\\.1:.*"})) >= 2'
            )
            wait_for("the rules' first evaluation", lambda: get_json(f"{base}/api/v1/query?query={q}")["data"]["result"], within=600)
            # And that evaluation ended (the rules after those, the fleet-wide ones among
            # them, are written in their turn): the first read, whose queries are counted,
            # finds every rule.
            wait_for("the rules' first evaluation to end", lambda: rules_quiet_for(base) > 0, within=600)
        for binary, extra in [(b, e) for b in args.strata for e in (args.read or [""])]:
            cmd = [binary, "fleet", "--prometheus", base, "--json", "--scrape-interval", "300", "--timeout", str(args.timeout)] + extra.split()
            stats = Stats()
            server = proxy(f"127.0.0.1:{port}", stats)
            pcmd = cmd[:3] + [f"http://127.0.0.1:{server.server_port}"] + cmd[4:]
            out, _, _, _ = time_v(pcmd)
            server.shutdown()
            fleet = json.loads(out)
            if args.keep:
                if os.path.exists(om):
                    os.remove(om)
                with open(os.path.join(work, f"fleet-{os.path.basename(binary)}-{len(rows)}.json"), "w") as f:
                    json.dump(comparable(fleet), f, indent=1, sort_keys=True)
            runs, prom_cpus = [], []
            budget = 5.0
            for _ in range(args.runs):
                run, cpu = timed_read(cmd, prom, base, budget)
                runs.append(run)
                prom_cpus.append(cpu)
                budget = max(5.0, 3 * run[0] + 2)
            prom_cpu = statistics.median(prom_cpus)
            problems = fleet["problems"]
            up = sum(1 for x in fleet["nodes"] if x["state"] == "up")
            outliers = sum(1 for x in fleet["findings"] if x["kind"] == "rank_outlier")
            rows.append(
                {
                    "nodes": n,
                    "strata": binary + (f" {extra}" if extra else ""),
                    "queries": len(stats.queries),
                    "series": sum(s for _, s, _, _ in stats.queries),
                    "samples": sum(t for _, _, t, _ in stats.queries),
                    "peak": sum(p for _, _, _, p in stats.queries),
                    "wall": statistics.median(r[0] for r in runs),
                    "cpu": statistics.median(r[1] for r in runs),
                    "rss": statistics.median(r[2] for r in runs) / 1024,
                    "prom_cpu": prom_cpu,
                    "up": up,
                    "jobs": len(fleet["jobs"]),
                    "outliers": outliers,
                    "problems": problems,
                    "by_query": stats.queries,
                    "fleet": comparable(fleet),
                }
            )
        for binary in args.strata if args.first_frame else []:
            cmd = [binary, "fleet", "--prometheus", base, "--scrape-interval", "300", "--timeout", str(args.timeout)]
            times = first_frames(cmd, args.first_frame)
            shown = ", ".join(f"{t:.2f}" for t in sorted(times))
            print(f"# {n} nodes: {binary}: first frame in {statistics.median(times):.2f} s (median of {len(times)}: {shown})", file=sys.stderr)
        if args.rules:
            for g in get_json(f"{base}/api/v1/rules")["data"]["groups"]:
                print(f"# {n} nodes: rule group {g['name']}: {g.get('evaluationTime', 0):.2f} s an evaluation, every {g.get('interval', 0):.0f} s", file=sys.stderr)
    finally:
        prom.terminate()
        prom.wait()
        for d in demos:
            d.terminate()
            d.wait()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="10,100,1000", help="fleet sizes, comma-separated")
    ap.add_argument("--runs", type=int, default=5, help="timed reads a size (the median is shown)")
    ap.add_argument("--history", type=int, default=300, help="seconds of samples for the series read now")
    ap.add_argument("--strata", action="append", help="strata binaries to compare (default target/debug/strata)")
    ap.add_argument("--rules", action="append", default=[], help="a rule file for Prometheus to load")
    ap.add_argument("--evaluation-interval", default="1m", help="how often Prometheus evaluates --rules")
    ap.add_argument("--keep", help="a folder to keep the data, the JSON and Prometheus's log in")
    ap.add_argument("--timeout", type=float, default=120, help="the fleet's --timeout a query (its default, 5, is too short for the raw job query at 1000 nodes)")
    ap.add_argument("--read", action="append", help="the fleet's options for one read of each binary, space-separated (e.g. \"--rows 200\"); repeat for more reads; default one read with none")
    ap.add_argument("--by-query", action="store_true", help="also print each query's figures")
    ap.add_argument("--first-frame", type=int, default=0, metavar="RUNS", help="also time the screen's first frame under tmux, RUNS times a binary")
    ap.add_argument("--stale", type=int, default=0, help="how many nodes (the first; node-0000 holds ranks of the 512-rank job) have samples 10,000 s old")
    args = ap.parse_args()
    args.strata = args.strata or ["target/debug/strata"]
    for tool in ("promtool", "prometheus", "/usr/bin/time"):
        if not shutil.which(tool):
            sys.exit(f"fleet_scale: {tool} not found (hint: apt-get install prometheus time)")
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        work = os.path.join(args.keep, str(n)) if args.keep else tempfile.mkdtemp(prefix="fleet-scale-")
        os.makedirs(work, exist_ok=True)
        try:
            rows += bench(n, args, work)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    print("| nodes | strata | queries | series answered | samples touched | peak samples | wall | CPU | peak RSS | Prometheus CPU | CPU / 15 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['nodes']} | {r['strata']} | {r['queries']} | {r['series']:,} | {r['samples']:,} | {r['peak']:,} "
            f"| {r['wall']:.2f} s | {r['cpu']:.2f} s | {r['rss']:.0f} MiB | {r['prom_cpu']:.2f} s "
            f"| {100 * r['cpu'] / 15:.1f} % + {100 * r['prom_cpu'] / 15:.1f} % |"
        )
    for r in rows:
        print(f"# {r['nodes']} nodes, {r['strata']}: {r['up']} nodes up, {r['jobs']} jobs, {r['outliers']} rank_outlier, problems {r['problems']}", file=sys.stderr)
        if args.by_query:
            for promql, series, samples, peak in r["by_query"]:
                print(f"#   {series:>8,} series {samples:>11,} samples {peak:>9,} peak  {promql[:110]}", file=sys.stderr)
    # The same fleet read by each binary: say where their JSON differs.
    by_size = {}
    for r in rows:
        by_size.setdefault(r["nodes"], []).append(r)
    for n, rs in by_size.items():
        for r in rs[1:]:
            same = r["fleet"] == rs[0]["fleet"]
            print(f"# {n} nodes: {r['strata']} {'same JSON as' if same else 'JSON DIFFERS from'} {rs[0]['strata']}", file=sys.stderr)


if __name__ == "__main__":
    main()
