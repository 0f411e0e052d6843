"""A peer that speaks the feed protocol badly, for the monitor's trust and limit tests.

    hostile_agent.py FEED_DIR MODE

Listens on FEED_DIR/<pid>.sock like the agent, prints "ready <pid>" once listening, and
sends, to every monitor that connects:
  claim-other-pid   a hello whose pid is not this process's
  bad-lines         a valid hello, then malformed JSON, an oversized line, an unknown
                    version, an unknown type, a sample with a negative size, then good samples
  flood             a valid hello, then sample lines as fast as the socket takes them
Runs until killed.
"""

import json
import os
import socket
import sys
import threading
import time

feed_dir, mode = sys.argv[1], sys.argv[2]
pid = os.getpid()
path = os.path.join(feed_dir, "%d.sock" % pid)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(8)
print("ready %d" % pid, flush=True)


def line(obj):
    return (json.dumps(obj) + "\n").encode()


def hello(claimed):
    return line({"v": 1, "type": "hello", "time": time.time(), "pid": claimed,
                 "agent_version": "hostile", "framework": "torch", "backend": "native",
                 "interval": 0.1,
                 "devices": [{"index": 0, "uuid": "5f3c2a1e-8b7d-4c6e-9a10-2d4f6b8e0c31",
                              "pci_bus_id": "00000000:18:00.0"}]})


seq = [0]


def sample():
    seq[0] += 1
    t = time.time()
    return line({"v": 1, "type": "sample", "seq": seq[0], "time": t,
                 "devices": [{"index": 0, "allocated": 1 << 30, "reserved": 2 << 30,
                              "inactive_split": 0, "reserved_since": t - 5}]})


def serve(conn):
    try:
        if mode == "claim-other-pid":
            conn.sendall(hello(pid + 1))
            while True:
                conn.sendall(sample())
                time.sleep(0.1)
        conn.sendall(hello(pid))
        if mode == "bad-lines":
            conn.sendall(b"{this is not json\n")
            conn.sendall(b"[1, 2, 3]\n")
            conn.sendall(b"{\"v\": 1, \"type\": \"sample\", \"pad\": \"" + b"x" * 70000 + b"\"}\n")
            conn.sendall(line({"v": 2, "type": "sample", "seq": 1, "time": time.time(), "devices": []}))
            conn.sendall(line({"v": 1, "type": "gossip", "time": time.time()}))
            conn.sendall(line({"v": 1, "type": "sample", "seq": 1, "time": time.time(),
                               "devices": [{"index": 0, "allocated": -5, "reserved": 1}]}))
            conn.sendall(b"\x1b[2J\x1b]0;pwned\x07\n")
            while True:
                conn.sendall(sample())
                time.sleep(0.1)
        if mode == "flood":
            chunk = b"".join(sample() for _ in range(200))
            while True:
                conn.sendall(chunk)
    except OSError:
        pass


while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
