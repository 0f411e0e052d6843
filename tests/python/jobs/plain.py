"""A job with output on both streams and exit code 7 (or, with argument "raise", an uncaught
exception): the agent must change none of it."""

import sys
import time

print("hello from the job")
sys.stderr.write("a warning from the job\n")
time.sleep(0.15)
if sys.argv[1:] == ["raise"]:
    raise ValueError("the job failed")
print("done")
sys.exit(7)
