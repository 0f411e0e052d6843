#!/usr/bin/env python3
"""Feed dirs as a root monitor meets them on a shared node, under a private /tmp.

Run as root under `unshare -m --propagation private`: it mounts a tmpfs on /tmp (so nothing
here is seen outside, and no other /tmp/strata-* dir is seen here), lays out one case, starts
the agents it needs as their own uids (setpriv), writes a fake NVML scenario listing them, and
then either prints the last of three samples of `strata snapshot --json` (one line), or with --monitor SECS runs the
full-screen monitor in tmux for SECS seconds and prints its CPU share, or with --detail prints
the monitor's screen with the first process's reconciliation view open.

Cases:
  cross-user   uid 1000 leaves DEAD (5000) dead sockets in /tmp/strata-1000; uid 65534 runs a
               live agent in /tmp/strata-65534
  own-dir      a live agent of uid 1000, then DEAD (10000) dead sockets in its own dir
  link         uid 65534's live agent; uid 1000 links /tmp/strata-1 -> /tmp/strata-65534
  not-socket   three processes of uid 1000 whose <pid>.sock is a FIFO, a symbolic link to
               /etc/shadow, a regular file
  clean        uid 65534's live agent alone (the baseline)

Usage: isolated_tmp.py CASE STRATA FAKE_NVML_LIB PYTHONPATH [--dead N]
           [--monitor SECS [--warmup SECS] | --detail]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

GIB = 1 << 30
PYTHON = "/usr/bin/python3"
AGENT = (
    "import os, strata_feed, time; strata_feed.start(interval=0.2); "
    "print('up', os.getpid(), flush=True); time.sleep(900)"
)


def feed_dir(uid):
    path = "/tmp/strata-%d" % uid
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, uid)
    os.chmod(path, 0o700)
    return path


def dead_sockets(directory, uid, count, first=100000):
    """Sockets nobody listens on: bound, then closed (the file stays), owned by uid."""
    for n in range(first, first + count):
        path = os.path.join(directory, "%d.sock" % n)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()
        os.lchown(path, uid, uid)


def as_user(uid, argv, pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    env.pop("STRATA_FEED_DIR", None)
    return subprocess.Popen(
        ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + argv,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def agent(uid, pythonpath):
    child = as_user(uid, [PYTHON, "-c", AGENT], pythonpath)
    line = child.stdout.readline().split()
    assert line[:1] == ["up"], line
    pid = int(line[1])
    sock = "/tmp/strata-%d/%d.sock" % (uid, pid)
    for _ in range(500):
        if os.path.exists(sock):
            break
        time.sleep(0.02)
    else:
        sys.exit("no socket at %s" % sock)
    return child, pid


def after_first_sweep(directory, uid):
    """Returns once the agent in `directory` has swept it for the sockets of dead processes,
    which it does a second after it starts and then once a minute: a socket of a pid that
    does not exist, laid there now, is gone. Dead sockets laid out after that stay while
    the monitor looks (a minute), whatever the machine's load."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while pid > 1 and os.path.exists("/proc/%d" % pid):
        pid -= 1
    dead_sockets(directory, uid, 1, first=pid)
    canary = os.path.join(directory, "%d.sock" % pid)
    deadline = time.monotonic() + 150
    while os.path.exists(canary):
        if time.monotonic() > deadline:
            sys.exit("the agent never swept %s" % directory)
        time.sleep(0.05)


def sleeper(uid, pythonpath):
    return as_user(uid, ["sleep", "900"], pythonpath)


def scenario(pids):
    procs = [{"pid": p, "used": 4 * GIB} for p in pids]
    return {
        "devices": [
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31",
                "pci_bus_id": "00000000:18:00.0",
                "memory": {"total": 85520809984, "reserved": 536870912, "used": 4 * GIB * len(pids)},
                "utilization": {"gpu": 90, "memory": 40},
                "mig_mode": "NotSupported",
                "compute_processes": procs,
            }
        ]
    }


def lay_out(case, dead, pythonpath):
    """Returns (children to kill, pids NVML lists, facts about the layout)."""
    children, listed, facts = [], [], {}
    if case in ("cross-user", "link", "clean"):
        feed_dir(65534)
        child, pid = agent(65534, pythonpath)
        children.append(child)
        listed.append(pid)
        facts["agent"] = pid
    if case == "cross-user":
        dead_sockets(feed_dir(1000), 1000, dead or 5000)
    elif case == "link":
        os.symlink("/tmp/strata-65534", "/tmp/strata-1")
        os.lchown("/tmp/strata-1", 1000, 1000)
    elif case == "own-dir":
        directory = feed_dir(1000)
        child, pid = agent(1000, pythonpath)
        children.append(child)
        listed.append(pid)
        facts["agent"] = pid
        after_first_sweep(directory, 1000)
        dead_sockets(directory, 1000, dead or 10000)
        order = os.listdir(directory)
        facts["position"] = order.index("%d.sock" % pid)
    elif case == "not-socket":
        directory = feed_dir(1000)
        kinds = {}
        for kind in ("fifo", "link", "file"):
            child = sleeper(1000, pythonpath)
            children.append(child)
            listed.append(child.pid)
            path = os.path.join(directory, "%d.sock" % child.pid)
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "link":
                os.symlink("/etc/shadow", path)
            else:
                open(path, "w").close()
            os.lchown(path, 1000, 1000)
            kinds[kind] = child.pid
        facts["pids"] = kinds
    return children, listed, facts


def outer_tmp(args):
    """A checkout under /tmp (a fresh clone there, say) would vanish under the private /tmp:
    the real /tmp is bound at /mnt first (in this mount namespace only), and the paths that
    lead into it are read from there."""
    paths = [args.strata, args.nvml_lib] + args.pythonpath.split(os.pathsep)
    if not any(p == "/tmp" or p.startswith("/tmp/") for p in paths):
        return
    subprocess.run(["mount", "--bind", "/tmp", "/mnt"], check=True)

    def moved(p):
        return "/mnt" + p[len("/tmp"):] if p == "/tmp" or p.startswith("/tmp/") else p

    args.strata, args.nvml_lib = moved(args.strata), moved(args.nvml_lib)
    args.pythonpath = os.pathsep.join(moved(p) for p in args.pythonpath.split(os.pathsep))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case")
    parser.add_argument("strata")
    parser.add_argument("nvml_lib")
    parser.add_argument("pythonpath")
    parser.add_argument("--dead", type=int, default=0)
    parser.add_argument("--monitor", type=float, default=0)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--detail", action="store_true")
    args = parser.parse_args()
    outer_tmp(args)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "strata-test-tmp", "/tmp"], check=True)
    children, listed, facts = lay_out(args.case, args.dead, args.pythonpath)
    try:
        with open("/tmp/scenario.json", "w") as f:
            json.dump(scenario(listed), f)
        env = dict(os.environ, STRATA_FAKE_NVML_SCENARIO="/tmp/scenario.json")
        env.pop("STRATA_FEED_DIR", None)
        if args.detail:
            print(json.dumps({"facts": facts, "screen": detail(args, env)}))
        elif args.monitor:
            print(json.dumps({"facts": facts, "cpu": monitor(args, env)}))
        else:
            # The last of three samples: a snapshot waits a bounded time for the feed
            # scan at each sample, and on a loaded machine the first scan of thousands of
            # dead sockets can outlast the first wait.
            out = subprocess.run(
                [args.strata, "snapshot", "--json", "--count", "3", "--interval", "2",
                 "--nvml-lib", args.nvml_lib],
                env=env, stdout=subprocess.PIPE, check=True,
            ).stdout
            last = out.decode().strip().splitlines()[-1]
            print(json.dumps({"facts": facts, "snapshot": json.loads(last)}))
    finally:
        for child in children:
            child.kill()
            child.wait()


def detail(args, env):
    """The monitor in tmux (250x60): the first process's reconciliation view (Enter), as text."""
    server = "strata-isolated-%d" % os.getpid()
    command = "STRATA_FAKE_NVML_SCENARIO=/tmp/scenario.json %s --interval 0.5 --nvml-lib %s" % (
        args.strata, args.nvml_lib)
    subprocess.run(["tmux", "-L", server, "new-session", "-d", "-x", "250", "-y", "60", command],
                   check=True, env=env)
    try:
        screen = ""
        for _ in range(100):
            time.sleep(0.1)
            screen = subprocess.run(["tmux", "-L", server, "capture-pane", "-p"],
                                    stdout=subprocess.PIPE, text=True).stdout
            if "refused" in screen:
                break
        subprocess.run(["tmux", "-L", server, "send-keys", "Enter"], check=True)
        for _ in range(50):
            time.sleep(0.1)
            screen = subprocess.run(["tmux", "-L", server, "capture-pane", "-p"],
                                    stdout=subprocess.PIPE, text=True).stdout
            if "belongs" in screen:
                break
        return screen
    finally:
        subprocess.run(["tmux", "-L", server, "kill-server"], stderr=subprocess.DEVNULL)


def monitor(args, env):
    """The monitor in tmux (120x40, 1 s interval) for SECS: its CPU share of one core."""
    server = "strata-isolated-%d" % os.getpid()
    command = "STRATA_FAKE_NVML_SCENARIO=/tmp/scenario.json %s --interval 1 --nvml-lib %s" % (
        args.strata, args.nvml_lib)
    subprocess.run(["tmux", "-L", server, "new-session", "-d", "-x", "120", "-y", "40", command],
                   check=True, env=env)
    try:
        time.sleep(args.warmup)
        shell = subprocess.run(["tmux", "-L", server, "display-message", "-p", "#{pane_pid}"],
                               stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
        found = subprocess.run(["pgrep", "-P", shell], stdout=subprocess.PIPE, text=True).stdout.split()
        pid = int(found[0]) if found else int(shell)
        hz = os.sysconf("SC_CLK_TCK")

        def ticks():
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])

        t0, w0 = ticks(), time.monotonic()
        time.sleep(args.monitor)
        t1, w1 = ticks(), time.monotonic()
        screen = subprocess.run(["tmux", "-L", server, "capture-pane", "-p"],
                                stdout=subprocess.PIPE, text=True).stdout
        return {"percent": 100.0 * (t1 - t0) / hz / (w1 - w0), "seconds": w1 - w0,
                "screen_says_waiting": " waiting " in screen or "waiting" in screen}
    finally:
        subprocess.run(["tmux", "-L", server, "kill-server"], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
