"""The agent thread: one selectors loop that serves monitors and samples the framework."""

import collections
import itertools
import json
import os
import socket
import sys
import threading
import time

from . import _feeddir, _server, _frameworks

VERSION = "0.1.0"
LINE_LIMIT = 65536
MAX_DEVICES = 64
WARMUP_PERIOD = 0.05  # seconds between samples right after the framework initialised
WARMUP_SECONDS = 5.0
DETECT_PERIOD = 0.1  # seconds between looks in sys.modules for a framework...
DETECT_SECONDS = 60.0  # ...during the agent's first minute
WATCH_PERIOD = 0.05  # seconds between looks at an imported, uninitialised framework
INIT_POLL = 0.002  # after torch's lazy-init callback, until is_initialized() is true
INIT_POLL_SECONDS = 2.0
DUTY = 0.01  # the agent's share of one core, at most
MAX_INTERVAL = 120.0

_thread_time_ns = getattr(time, "thread_time_ns", None) or (lambda: 0)


def encode(obj):
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


class Timer(object):
    """Times framework calls: each one holds the GIL for its duration."""

    __slots__ = ("max_ns", "excluded_ns")

    def __init__(self):
        self.max_ns = 0
        self.excluded_ns = 0  # CPU time not to count in the duty cycle (rare snapshots)

    def call(self, fn, *args):
        t0 = time.perf_counter_ns()
        try:
            return fn(*args)
        finally:
            d = time.perf_counter_ns() - t0
            if d > self.max_ns:
                self.max_ns = d


class Agent(object):
    def __init__(self, interval, feed_dir):
        self.pid = os.getpid()
        self.base_interval = interval
        self.interval = interval  # effective: stretched when sampling is expensive
        self.feed_dir = feed_dir
        self.sock_path = _feeddir.socket_path(feed_dir, self.pid)
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.hub = _server.Hub(self.sock_path)
        self.thread = None
        self.seq = itertools.count(1)
        self.lock = threading.Lock()  # seq and pending, shared with the job's threads
        self.pending = collections.deque(maxlen=256)  # oom lines from the job's threads
        self.wake_r = self.wake_w = None
        self.stopping = None  # the bye reason once asked to stop
        self.done = threading.Event()
        self.next_tick = 0.0
        self.cost_est = 0.0  # CPU seconds per tick, as the interval is sized for
        self.since = {}  # device index -> (key, reserved_since) of the previous sample
        self.frameworks = _frameworks.Frameworks(self)
        self.init_hint = None  # monotonic time torch's lazy-init callback ran
        self.warm_until = None
        self.hello_key = None
        self.tick_errors = 0
        self.error_note = None
        self._static = {
            "pid": self.pid,
            "agent_version": VERSION,
            # What platform.python_version() says, without importing platform.
            "python": sys.version.split()[0],
            "executable": sys.executable or None,
            "started": self.started,
        }

    # -- life -----------------------------------------------------------------------------

    def open(self):
        err = self.hub.open()
        if err is not None:
            return err
        try:
            r, w = socket.socketpair()
            r.setblocking(False)
            w.setblocking(False)
            self.wake_r, self.wake_w = r, w
            import selectors

            self.hub.sel.register(r, selectors.EVENT_READ, self._on_wake)
        except Exception as e:
            self.hub.close_all()
            self.hub.unlink()
            return "cannot create the wake-up socket pair: %s" % e
        return None

    def start_thread(self):
        self.thread = threading.Thread(target=self._run, name="strata-feed", daemon=True)
        self.thread.start()

    def alive(self):
        return self.thread is not None and self.thread.is_alive() and self.stopping is None

    def stop(self, reason):
        self.stopping = reason
        self.wake()
        t = self.thread
        if t is not None and t is not threading.current_thread() and t.is_alive():
            t.join(1.0)
        if not self.done.is_set():
            # The thread is stuck in a framework call, or never ran: at least remove the
            # socket so no monitor connects to a feed that is going away.
            self.hub.unlink()

    def abandon(self):
        """In a forked child: drop everything inherited, touching nothing of the parent's."""
        self.stopping = "fork"
        self.hub.abandon()
        for s in (self.wake_r, self.wake_w):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self.wake_r = self.wake_w = None

    def wake(self):
        w = self.wake_w
        if w is not None:
            try:
                w.send(b"\0")
            except OSError:
                pass  # full (already woken) or closed

    def _on_wake(self, mask):
        try:
            while self.wake_r.recv(4096):
                pass
        except OSError:
            pass

    # -- called from the job's threads ----------------------------------------------------

    def framework_init_hint(self):
        """torch's lazy-init callback: sample as soon as the job's CUDA init completes."""
        self.init_hint = time.monotonic()
        self.wake()

    def post_oom(self, msg):
        """An oom message built on the job's thread: number it, queue it, wake the agent."""
        with self.lock:
            msg["seq"] = next(self.seq)
            line = encode(msg)
            if len(line) <= LINE_LIMIT:
                self.pending.append(line)
        self.wake()

    # -- the thread -----------------------------------------------------------------------

    def _run(self):
        try:
            self._loop()
        except BaseException:
            pass
        finally:
            try:
                self._shutdown()
            except BaseException:
                pass
            self.done.set()

    def _loop(self):
        hub = self.hub
        self._update_hello()
        self.next_tick = time.monotonic()
        while self.stopping is None:
            timeout = self.next_tick - time.monotonic()
            if self.init_hint is not None:
                timeout = min(timeout, INIT_POLL)
            hub.select(max(0.0, timeout))
            self._drain_pending()
            if self.stopping is not None:
                break
            if time.monotonic() >= self.next_tick or self._init_pending():
                self._tick()

    def _init_pending(self):
        h = self.init_hint
        if h is None:
            return False
        if self.frameworks.reader is not None or time.monotonic() - h > INIT_POLL_SECONDS:
            self.init_hint = None
            return False
        return True

    def _drain_pending(self):
        if not self.pending:
            return
        with self.lock:
            lines = list(self.pending)
            self.pending.clear()
        for line in lines:
            self.hub.publish(line)

    def _shutdown(self):
        self._drain_pending()
        reason = self.stopping or "exit"
        bye = encode({"v": 1, "type": "bye", "time": time.time(), "reason": reason})
        self.hub.send_bye_and_close(bye)
        self.hub.unlink()
        for s in (self.wake_r, self.wake_w):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass

    def _tick(self):
        cpu0 = _thread_time_ns()
        timer = Timer()
        sampled = False
        try:
            now = time.time()
            fw = self.frameworks
            entries = fw.sample(now, timer)
            read_ns = _thread_time_ns() - cpu0
            self._update_hello()
            if entries:
                sampled = True
                self._publish_sample(now, entries, read_ns, timer.max_ns)
            self.tick_errors = 0
            self.error_note = None
        except Exception as e:
            self.tick_errors += 1
            self.error_note = "agent error: %s: %s" % (type(e).__name__, e)
            try:
                self._update_hello()
            except Exception:
                pass
        cost = max(0, _thread_time_ns() - cpu0 - timer.excluded_ns) / 1e9
        self._schedule(cost, sampled)

    def _publish_sample(self, now, entries, read_ns, gil_ns):
        since = {}
        for e in entries:
            key = (e.get("reserved"), e.get("device_allocs"), e.get("device_frees"))
            prev = self.since.get(e["index"])
            t = prev[1] if prev is not None and prev[0] == key else now
            e["reserved_since"] = t
            since[e["index"]] = (key, t)
        self.since = since
        msg = {
            "v": 1,
            "type": "sample",
            "seq": 0,
            "time": now,
            "devices": entries,
            "cost": {"read_us": int(read_ns // 1000), "gil_max_us": int(gil_ns // 1000)},
        }
        with self.lock:
            early = list(self.pending)
            self.pending.clear()
            msg["seq"] = next(self.seq)
        for line in early:
            self.hub.publish(line)
        line = encode(msg)
        if len(line) > LINE_LIMIT:
            self.hub.oversized += 1
            return
        self.hub.publish(line)

    def reserved_since_for(self, entry, now):
        """For an oom's stats: the last sample's reserved_since if nothing changed since."""
        prev = self.since.get(entry.get("index"))
        key = (entry.get("reserved"), entry.get("device_allocs"), entry.get("device_frees"))
        return prev[1] if prev is not None and prev[0] == key else now

    def _schedule(self, cost, sampled):
        # Follows a rise at once (JAX's first memory_stats may cost 100 ms: stretch right
        # away), a fall by half per tick. One-off set-up (imports) is not counted.
        est = max(cost, self.cost_est * 0.5)
        self.cost_est = est
        need = est / DUTY
        cur = self.interval
        if need > cur:
            while cur < need and cur * 2 <= MAX_INTERVAL:
                cur *= 2
        else:
            while cur > self.base_interval and need <= 0.7 * (cur / 2):
                cur /= 2
        cur = max(cur, self.base_interval)
        if cur != self.interval:
            self.interval = cur
            try:
                self._update_hello()
            except Exception:
                pass
        delay = self.interval
        now = time.monotonic()
        fw = self.frameworks
        if fw.reader is None:
            # Notice the framework soon: torch's lazy-init hook should be in place before
            # the job initialises CUDA (then the hook wakes the agent); JAX and CuPy have
            # no such hook, so their initialisation is watched for. A process that imports
            # no framework in its first minute is looked at every interval only.
            if fw.imported and not fw.hooked:
                delay = min(delay, WATCH_PERIOD)
            elif not fw.imported and now - self.started_mono < DETECT_SECONDS:
                delay = min(delay, DETECT_PERIOD)
        if self.warm_until is not None and now < self.warm_until:
            if self.frameworks.warm():
                delay = max(min(WARMUP_PERIOD, self.interval), need)
            else:
                self.warm_until = now  # every device holds memory: warm-up is over
        self.next_tick = now + delay

    def begin_warmup(self):
        self.warm_until = time.monotonic() + WARMUP_SECONDS

    def in_warmup(self):
        w = self.warm_until
        return w is not None and time.monotonic() < w

    def _update_hello(self):
        h = self.frameworks.hello_fields()
        fields = dict(self._static)
        fields["interval"] = round(self.interval, 6)
        fields.update(h)
        if self.error_note:
            fields["note"] = (fields.get("note") + "; " if fields.get("note") else "") + self.error_note
        if fields.get("note"):
            fields["note"] = fields["note"][:1000]
        if fields == self.hello_key:
            return
        msg = {"v": 1, "type": "hello", "time": time.time()}
        msg.update(fields)
        line = encode(msg)
        if len(line) > LINE_LIMIT:
            msg["devices"] = msg["devices"][:MAX_DEVICES // 4]
            msg["note"] = "hello too long: devices cut"
            line = encode(msg)
        self.hello_key = fields
        self.hub.set_hello(line)
