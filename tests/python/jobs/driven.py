"""A job the tests drive line by line over stdin.

Each stdin line is a Python statement run in the job's namespace; the job answers "ok" (or
"ok <json>" for a line starting with "=", which is evaluated as an expression) or
"err <type>: <message>". The agent starts first unless STRATA_TEST_START=no; its interval is
STRATA_TEST_INTERVAL (default 0.05).
"""

import faulthandler
import json
import os
import signal
import sys

# A test that times out asks where each thread is (support.Job.stacks).
faulthandler.register(signal.SIGUSR1, all_threads=True)

if os.environ.get("STRATA_TEST_START", "yes") == "yes":
    import strata_feed

    strata_feed.start(interval=float(os.environ.get("STRATA_TEST_INTERVAL") or 0.05))

ns = {"__name__": "__job__"}
out = sys.stdout
out.write("ready %d\n" % os.getpid())
out.flush()
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line:
        continue
    try:
        if line.startswith("="):
            value = eval(line[1:], ns)
            out.write("ok %s\n" % json.dumps(value, default=repr))
        else:
            exec(line, ns)
            out.write("ok\n")
    except SystemExit:
        raise
    except BaseException as e:
        out.write("err %s: %s\n" % (type(e).__name__, str(e).replace("\n", " ")))
    out.flush()
