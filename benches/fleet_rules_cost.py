#!/usr/bin/env python3
"""What the recording rules cost Prometheus on a fleet larger than this machine can run.

Writes N nodes x 8 GPUs x 8 processes as benches/fleet_scale.py does (the same series, as
`strata serve` writes them), loads them with `promtool tsdb create-blocks-from openmetrics`,
then, for each set of rule files named on the command line, starts Prometheus on that data
with only those rules (evaluated every --interval, nothing scraped, nothing else asked of
it), lets every group evaluate once (its first evaluation reads cold pages), and measures
the next --evaluations evaluations of every group: the CPU Prometheus spent over them
(utime + stime of its process, so Go's garbage collection and the groups' own concurrency
are in it) and each group's evaluation time as Prometheus reports it.

    python3 benches/fleet_rules_cost.py \\
        now=assets/prometheus/strata-rules.yml,assets/prometheus/strata-fleet-rules.yml \\
        before=/tmp/old-rules.yml,/tmp/old-fleet-rules.yml

The backfilled samples end a minute before the run and Prometheus looks back 15 minutes, so
every set must be measured within about 13 minutes of the start: at 1000 nodes and a one
minute interval, three sets fit. A benchmark, not a test: its numbers depend on the machine.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_scale  # noqa: E402  (the fleet's series and the helpers to run Prometheus)


def groups(base):
    return fleet_scale.get_json(base + "/api/v1/rules")["data"]["groups"]


def measure(name, files, data, work, interval, evaluations):
    config = os.path.join(work, f"{name}.yml")
    with open(config, "w") as f:
        f.write(f"global:\n  evaluation_interval: {interval}s\nrule_files:\n")
        f.writelines(f"  - {os.path.abspath(r)}\n" for r in files)
    port = fleet_scale.free_port()
    base = f"http://127.0.0.1:{port}"
    prom = fleet_scale.start_prometheus(config, data, port, os.path.join(work, f"{name}.log"))
    try:
        fleet_scale.wait_for("Prometheus", lambda: urllib.request.urlopen(base + "/-/ready", timeout=5).status == 200)
        never = "0001-01-01T00:00:00Z"
        fleet_scale.wait_for(
            "every group's first evaluation",
            lambda: all(g["lastEvaluation"] != never for g in groups(base)),
            within=10 * interval,
        )
        last = {g["name"]: g["lastEvaluation"] for g in groups(base)}
        seen = {k: [] for k in last}
        cpu, start = fleet_scale.process_cpu(prom.pid), time.time()
        while any(len(v) < evaluations for v in seen.values()):
            time.sleep(0.5)
            for g in groups(base):
                if g["lastEvaluation"] != last[g["name"]]:
                    last[g["name"]] = g["lastEvaluation"]
                    errors = [r["lastError"] for r in g["rules"] if r.get("lastError")]
                    if errors:
                        sys.exit(f"fleet_rules_cost: {name}: {g['name']}: {errors[0]}")
                    seen[g["name"]].append(g["evaluationTime"])
            if time.time() - start > (evaluations + 2) * interval:
                sys.exit(f"fleet_rules_cost: {name}: the groups did not evaluate {evaluations} times")
        cpu = fleet_scale.process_cpu(prom.pid) - cpu
        wall = time.time() - start
    finally:
        prom.terminate()
        prom.wait()
    each = ", ".join(f"{g} {' / '.join(f'{t:.1f}' for t in ts)} s" for g, ts in seen.items())
    print(
        f"| {name} | {cpu / evaluations:.1f} s | {100 * cpu / wall:.0f} % | {each} |",
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="+", help="NAME=RULES.yml[,RULES.yml...]: a set of rule files to measure")
    ap.add_argument("--nodes", type=int, default=1000, help="fleet size (default 1000)")
    ap.add_argument("--interval", type=int, default=60, help="seconds between evaluations (default 60)")
    ap.add_argument("--evaluations", type=int, default=2, help="evaluations measured a set (default 2)")
    args = ap.parse_args()
    sets = []
    for s in args.sets:
        name, _, files = s.partition("=")
        if not files:
            ap.error(f"{s}: NAME=RULES.yml[,RULES.yml...]")
        sets.append((name, files.split(",")))
    work = tempfile.mkdtemp(prefix="fleet-rules-cost-")
    try:
        om, data = os.path.join(work, "fleet.om"), os.path.join(work, "data")
        fleet_scale.write_openmetrics(om, args.nodes, int(time.time()) - 60, 300)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", om, data], check=True, capture_output=True)
        os.remove(om)
        print(f"# {args.nodes} nodes, evaluated every {args.interval} s, {args.evaluations} evaluations a set", file=sys.stderr)
        print("| rules | Prometheus CPU an evaluation | of a core | each group's evaluation time |")
        print("|---|---|---|---|")
        for name, files in sets:
            measure(name, files, data, work, args.interval, args.evaluations)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
