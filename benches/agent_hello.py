"""Hello latency while the job holds its framework's init lock (the real lock).

    python benches/agent_hello.py [--assets DIR] [--hold 6]     (run with a venv's python)

The job imports torch (or jax), takes torch.cuda._initialization_lock (jax's _backend_lock)
and holds it for --hold seconds, as its CUDA init would; a monitor connects 0.5 s in and the
time to its hello is printed. --assets runs another copy of assets/python (an older agent)."""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = """
import sys, time
{imports}
lock = {lock}
lock.acquire()
print("holding", flush=True)
time.sleep({hold})
lock.release()
"""
CASES = {"torch": ("import torch", "torch.cuda._initialization_lock"),
         "jax": ("import jax\nfrom jax._src import xla_bridge", "xla_bridge._backend_lock")}


def measure(assets, framework, hold):
    feed = tempfile.mkdtemp(prefix="strata-bench-")
    imports, lock = CASES[framework]
    env = dict(os.environ, STRATA_FEED_DIR=feed, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.path.join(assets, "strata_run") + os.pathsep + assets)
    p = subprocess.Popen([sys.executable, "-c", JOB.format(imports=imports, lock=lock, hold=hold)],
                         stdout=subprocess.PIPE, env=env, text=True)
    assert p.stdout.readline().strip() == "holding"
    time.sleep(0.5)
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(feed, "%d.sock" % p.pid))
    t0 = time.monotonic()
    s.settimeout(hold + 5)
    data = b""
    try:
        while b"\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    latency = time.monotonic() - t0 if b"\n" in data else None
    s.close()
    p.wait()
    return latency


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", default=os.path.join(os.path.dirname(HERE), "assets", "python"))
    ap.add_argument("--hold", type=float, default=6.0)
    args = ap.parse_args()
    for fw in CASES:
        try:
            __import__(fw)
        except ImportError:
            continue
        t = measure(args.assets, fw, args.hold)
        said = "no hello at all (the job ended first)" if t is None else "hello %.1f ms after connect" % (1000 * t)
        print("%-5s %s (lock held %.0f s)" % (fw, said, args.hold))


main()
