"""Test support: jobs run against the stubs, monitors that read a feed like strata does."""

import atexit
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ASSETS = os.path.join(REPO, "assets", "python")
STRATA_RUN = os.path.join(ASSETS, "strata_run")
STUBS = os.path.join(HERE, "stubs")
JOBS = os.path.join(HERE, "jobs")
PY = sys.executable
DEADLINE = 30.0  # seconds any single wait may take before the test fails: only a hang reaches it

_libdir = None


def fake_libcuda_dir():
    """The directory of libcuda.so.1, the fake CUDA driver built from fake_libcuda.c:
    $STRATA_TEST_FAKE_CUDA_DIR (built elsewhere, as for an interpreter in a root without a
    C compiler), else built once per test run."""
    global _libdir
    if _libdir is None and os.environ.get("STRATA_TEST_FAKE_CUDA_DIR"):
        _libdir = os.environ["STRATA_TEST_FAKE_CUDA_DIR"]
    if _libdir is None:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise unittest.SkipTest("no C compiler to build fake_libcuda.c")
        d = tempfile.mkdtemp(prefix="strata-fakecuda-")
        atexit.register(shutil.rmtree, d, True)
        subprocess.run(
            [cc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o",
             os.path.join(d, "libcuda.so.1"), os.path.join(HERE, "fake_libcuda.c")],
            check=True,
        )
        _libdir = d
    return _libdir


_nvml_dir = None


def fake_nvml_dir():
    """A directory holding libnvidia-ml.so.1, the fake NVML library (tests/fake-nvml):
    $STRATA_TEST_FAKE_NVML_DIR, else built once per test run with cargo into
    target/fake-nvml, as the Rust tests build it."""
    global _nvml_dir
    if _nvml_dir is not None:
        return _nvml_dir
    given = os.environ.get("STRATA_TEST_FAKE_NVML_DIR")
    if given:
        _nvml_dir = given
        return given
    cargo = os.environ.get("CARGO") or shutil.which("cargo")
    if cargo is None:
        raise unittest.SkipTest("no cargo to build the fake NVML library (tests/fake-nvml)")
    target = os.path.join(REPO, "target", "fake-nvml")
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    subprocess.run(
        [cargo, "build", "--quiet", "-p", "strata-fake-nvml", "--manifest-path",
         os.path.join(REPO, "Cargo.toml")],
        check=True, env=env,
    )
    d = tempfile.mkdtemp(prefix="strata-fakenvml-")
    atexit.register(shutil.rmtree, d, True)
    os.symlink(os.path.join(target, "debug", "libnvidia_ml.so"), os.path.join(d, "libnvidia-ml.so.1"))
    _nvml_dir = d
    return d


def nvml_scenario(specs, processes):
    """A fake NVML scenario with the stub's devices; processes: per device, a list of
    {"pid", "used"} (used may be an array by poll, or null)."""
    devices = []
    for i, spec in enumerate(specs):
        used = 0
        for p in processes[i] if i < len(processes) else []:
            u = p.get("used")
            u = u[-1] if isinstance(u, list) else u
            used += u or 0
        devices.append({
            "name": spec["name"],
            "uuid": "GPU-" + spec["uuid"],
            "pci_bus_id": spec["pci_bus_id"],
            "memory": {"total": spec["total"], "used": used},
            "compute_processes": processes[i] if i < len(processes) else [],
        })
    return {"devices": devices}


def device_specs(n, total=80 << 30):
    out = []
    for i in range(n):
        out.append({
            "uuid": "%08x-1111-4222-8333-%012x" % (0x5F3C2A10 + i, 0xABC0 + i),
            "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x20 * i),
            "name": "NVIDIA Stub %d" % i,
            "total": total,
        })
    return out


def fake_cuda_env(specs):
    return ";".join(
        "%s,%s,idle" % (d["uuid"].replace("-", ""), d["pci_bus_id"][4:]) for d in specs
    )


def pci_nvml(pci):
    dom, bus, rest = pci.split(":")
    return "%08X:%02X:%02X.0" % (int(dom, 16), int(bus, 16), int(rest.split(".")[0], 16))


def agent_threads(pid):
    """Names of the agent's threads in process pid, as the kernel has them (/proc comm,
    15 characters at most: 'strata-feed', 'strata-feed-sam')."""
    names = []
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return names
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("strata-feed"):
            names.append(name)
    return sorted(names)


def settled_agent_threads(pid):
    """agent_threads(pid) once the serving thread has named itself (after its first wait,
    within 50 ms of start) and a moment more."""
    wait_until(lambda: "strata-feed" in agent_threads(pid), what="the serving thread named")
    time.sleep(0.1)
    return agent_threads(pid)


def task_count(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def wait_until(cond, timeout=DEADLINE, what="condition"):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.01)


class Job(object):
    """A Python process; for jobs/driven.py, do() runs one statement in it. `prefix` runs it
    under another command (`unshare --pid --fork`)."""

    def __init__(self, env, script=None, args=(), ready=True, prefix=()):
        script = script or os.path.join(JOBS, "driven.py")
        self.p = subprocess.Popen(
            list(prefix) + [PY, script] + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, text=True, bufsize=1,
        )
        self.out = queue.Queue()
        self.err = []
        # Under another command its pid is not the Python process's: no stacks asked of it.
        self.own_pid = not prefix
        threading.Thread(target=self._pump, args=(self.p.stdout, self.out.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.p.stderr, self.err.append), daemon=True).start()
        self.pid = self.p.pid
        if ready:
            line = self.line()
            assert line.startswith("ready "), line
            self.pid = int(line.split()[1])

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put(line)
        put(None)

    def line(self, timeout=DEADLINE):
        try:
            line = self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("job said nothing; stderr: %s" % self.err_text())
        if line is None:
            raise AssertionError("job ended (rc %s); stderr: %s" % (self.p.poll(), self.err_text()))
        return line.rstrip("\n")

    def do(self, stmt, ok=True):
        self.p.stdin.write(stmt + "\n")
        self.p.stdin.flush()
        reply = self.line()
        if ok and not reply.startswith("ok"):
            raise AssertionError("%r -> %s; stderr: %s" % (stmt, reply, self.err_text()))
        return reply

    def err_text(self):
        return "".join(x for x in list(self.err) if x is not None)

    def stacks(self, wait=2.0):
        """Where each of the job's threads is now (jobs/driven.py dumps them on SIGUSR1), for a
        test that timed out: the end of the job's stderr after the dump, or why there is none."""
        if not self.own_pid or self.p.poll() is not None:
            return "(no stacks: the job is not a Python process of ours, or has ended)"
        before = len(self.err)
        try:
            os.kill(self.p.pid, signal.SIGUSR1)
        except OSError as e:
            return "(no stacks: %s)" % e
        end = time.monotonic() + wait
        while time.monotonic() < end and not any("most recent call first" in (x or "") for x in self.err[before:]):
            time.sleep(0.05)
        time.sleep(0.1)  # the rest of the dump
        return "".join(x for x in self.err[before:] if x is not None)[-6000:] or "(no stacks written)"

    def eval(self, expr):
        reply = self.do("=" + expr)
        return json.loads(reply[3:])

    def finish(self, timeout=DEADLINE):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        rc = self.p.wait(timeout)
        return rc

    def stderr(self, timeout=DEADLINE):
        self.p.wait(timeout)
        end = time.monotonic() + timeout
        while (not self.err or self.err[-1] is not None) and time.monotonic() < end:
            time.sleep(0.01)
        return "".join(x for x in self.err if x is not None)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class Monitor(object):
    """Connects to a feed socket and collects its messages on a thread."""

    def __init__(self, path, timeout=DEADLINE):
        self.path = path
        end = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                break
            except OSError:
                s.close()
                if time.monotonic() > end:
                    raise AssertionError("no feed at %s" % path)
                time.sleep(0.01)
        self.sock = s
        self.connected = time.monotonic()
        self.msgs = []
        self.arrived = []  # monotonic time each message came, for a timeout's message
        # Called on a timeout for more to say (the job's stacks: Case.monitor sets it).
        self.on_timeout = None
        self.raw_bytes = 0
        self.eof = False
        self.partial = b""  # at EOF: what followed the last newline (a line cut short)
        # Lines past 64 KiB, newline included (the monitor discards them): (bytes, their
        # start). Any fails the next wait at once.
        self.too_long = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.partial = buf
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.raw_bytes += len(data)
                buf += data
                *lines, buf = buf.split(b"\n")
                now = time.monotonic()
                for line in lines:
                    if len(line) + 1 > 65536:
                        self.too_long.append((len(line) + 1, line[:60]))
                        continue
                    self.msgs.append(json.loads(line))
                    self.arrived.append(now)
                self.cond.notify_all()

    def wait(self, pred, timeout=DEADLINE, start=0, what="a message"):
        """The first message at index >= start that pred accepts."""
        end = time.monotonic() + timeout
        with self.cond:
            i = start
            while True:
                if self.too_long:
                    n, head = self.too_long[0]
                    raise AssertionError("a line of %d bytes, over 64 KiB, came while waiting for %s: %r..."
                                         % (n, what, head))
                while i < len(self.msgs):
                    if pred(self.msgs[i]):
                        return self.msgs[i]
                    i += 1
                if self.eof:
                    raise AssertionError("feed closed before %s; got %s" % (what, self.types()))
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
        raise AssertionError("timed out waiting for %s; got %s%s" % (what, self.timeline(), self.more()))

    def timeline(self):
        """The last 20 messages' types, each with the seconds after the connection it came."""
        with self.cond:
            return ["%s@%.2fs" % (m.get("type"), t - self.connected)
                    for m, t in list(zip(self.msgs, self.arrived))[-20:]]

    def more(self):
        if self.on_timeout is None:
            return ""
        try:
            return "\nthe job's threads:\n%s" % self.on_timeout()
        except Exception as e:
            return "\n(the job's threads not read: %s)" % e

    def wait_eof(self, timeout=DEADLINE):
        end = time.monotonic() + timeout
        with self.cond:
            while not self.eof:
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("feed not closed")
                self.cond.wait(left)

    def snapshot(self):
        with self.cond:
            return list(self.msgs)

    def send(self, obj):
        """A line to the agent: a dict is sent as JSON, bytes as they are."""
        data = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode()
        self.sock.sendall(data)

    def sites(self, rid, seconds=1, top=20, **extra):
        """Asks for a sites window."""
        msg = {"v": 1, "type": "sites_request", "id": rid, "seconds": seconds, "top": top}
        msg.update(extra)
        self.send(msg)

    def sites_state(self, rid, *states):
        """The first `sites` message of request rid in one of the states."""
        return self.wait(lambda m: m.get("type") == "sites" and m.get("id") == rid and m.get("state") in states,
                         what="sites %s of request %d" % ("/".join(states), rid))

    def types(self):
        return [m.get("type") for m in self.msgs][-20:]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def is_sample(m):
    return m.get("type") == "sample"


def live_sample(m):
    return m.get("type") == "sample" and not m.get("backlog")


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-test-")
        self.feed = os.path.join(self.tmp, "feed")
        self.log = os.path.join(self.tmp, "stub.log")
        self.trace = os.path.join(self.tmp, "stub.trace")
        self.cuda_log = os.path.join(self.tmp, "cuda.log")
        self.jobs = []
        self.monitors = []

    def tearDown(self):
        for m in self.monitors:
            m.close()
        for j in self.jobs:
            j.kill()
            for s in (j.p.stdin, j.p.stdout, j.p.stderr):
                try:
                    s.close()
                except Exception:
                    pass
        shutil.rmtree(self.tmp, True)

    def env(self, devices=None, libcuda=False, pythonpath=None, **extra):
        env = dict((k, v) for k, v in os.environ.items()
                   if not k.startswith(("PYTORCH_", "XLA_", "STRATA_", "CUPY_", "JAX_")))
        specs = devices if devices is not None else device_specs(1)
        env.update(
            PYTHONPATH=os.pathsep.join(pythonpath or [STUBS, ASSETS]),
            PYTHONDONTWRITEBYTECODE="1",
            STRATA_FEED_DIR=self.feed,
            STRATA_STUB_LOG=self.log,
            STRATA_STUB_TRACE=self.trace,
            STRATA_STUB_DEVICES=json.dumps(specs),
            STRATA_FAKE_CUDA=fake_cuda_env(specs),
            STRATA_FAKE_CUDA_LOG=self.cuda_log,
        )
        if libcuda:
            d = fake_libcuda_dir()
            env["LD_LIBRARY_PATH"] = d + (os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env.update((k, str(v)) for k, v in extra.items())
        return env

    def job(self, env=None, **kw):
        j = Job(env if env is not None else self.env(), **kw)
        self.jobs.append(j)
        return j

    def sock_path(self, pid, feed=None):
        return os.path.join(feed or self.feed, "%d.sock" % pid)

    def monitor(self, pid, feed=None):
        m = Monitor(self.sock_path(pid, feed))
        # A wait that times out says where the job's threads were.
        m.on_timeout = next((j.stacks for j in self.jobs if j.own_pid and j.pid == pid), None)
        self.monitors.append(m)
        return m

    def read_file(self, path):
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def assertNoViolation(self):
        self.assertEqual(self.read_file(self.log), "", "the stubs saw calls the agent must never make")

    def trace_lines(self, agent_only=True):
        lines = self.read_file(self.trace).splitlines()
        if agent_only:
            lines = [x for x in lines if x.startswith("strata-feed ")]
        return lines
