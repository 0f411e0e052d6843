"""A multi-process launcher (like torchrun): spawns N workers with subprocess.

Each worker prints "worker <pid>", then waits for a line on stdin (the launcher forwards
"go" once its own stdin gives one), so the test can connect to every worker's feed.
"""

import subprocess
import sys

n = int(sys.argv[1])
worker = "import os, sys; os.write(1, b'worker %d\\n' % os.getpid()); sys.stdin.readline()"
procs = [
    subprocess.Popen([sys.executable, "-c", worker], stdin=subprocess.PIPE, stdout=sys.stdout)
    for _ in range(n)
]
sys.stdin.readline()
for p in procs:
    p.stdin.write(b"go\n")
    p.stdin.close()
sys.exit(max(p.wait() for p in procs))
