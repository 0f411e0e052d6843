"""The agent: a serving thread that never calls into a framework, and a sampling thread.

- The serving thread ("strata-feed") owns the socket: it accepts monitors, sends each its
  hello and backlog, and publishes what the sampler hands it. Before any framework is
  imported it also looks in sys.modules (a dict lookup, not a framework call) and starts
  the sampler once torch, jax or cupy appears. Nothing a framework does (an init lock held
  for seconds, a slow memory_stats) can delay a monitor's hello.
- The sampling thread ("strata-feed-sampler") exists only once a framework is imported. It
  waits for the job to initialise it, reads its statistics and hands lines over.
- Around os.fork() both threads stop and start again (the module's fork hooks), so a
  process that forks has no thread of the agent's at that instant.
- The job may close or replace the agent's descriptors (os.closerange, os.dup2): the hub
  checks each before use (_server), and once one is lost the feed stops for good, touching
  none of them again; info() says why, the job's stderr never does.
- Start-up costs the job a few imports (_thread, _socket, select; never threading,
  collections, itertools or json), the socket's bind and a thread start. The sweep of
  stale sockets waits a second; the hello is encoded when a monitor first connects.
"""

import _thread
import os
import sys
import time

from . import MAX_DEVICES, PROTOCOL, __version__ as VERSION
from . import _feeddir, _server
from ._threads import Thread, deque, name_os_thread
from ._wire import LINE_LIMIT, MADE_LIMIT, encode

DETECT_MIN = 0.05  # seconds between looks in sys.modules for a framework, at first...
DETECT_MAX = 2.0  # ...backing off to this
DETECT_RAMP = 20.0  # the period is the agent's age divided by this, within those bounds
SWEEP_FIRST = 1.0  # seconds after start of the first look for sockets of dead processes...
SWEEP_PERIOD = 60.0  # ...and between looks
LOOK_MAX = 2.0  # seconds the serving thread waits at most: it then checks its descriptors
LOST = "descriptors lost: the job closed or replaced them"  # why it stopped; info()'s error
MAX_REQUESTS = 16  # sites requests waiting for the sampler, at most
_FRAMEWORKS = ("torch", "jax", "cupy")


def wait_for_threads_to_exit(before, timeout=0.05):
    """On Linux a joined Python thread may still exist for a moment in the kernel (3.12
    joins by a lock released just before the thread ends). Wait, briefly, until the task
    count is back to `before`, so that os.fork() sees no thread of the agent's."""
    if before is None:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n = task_count()
        if n is None or n <= before:
            return
        time.sleep(0.0005)


def task_count():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _cut_texts(value, limit):
    """The same message with every text longer than `limit` cut to it (with "..." added)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "..."
    if isinstance(value, dict):
        return {k: _cut_texts(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_texts(v, limit) for v in value]
    return value


class Agent(object):
    def __init__(self, interval, feed_dir):
        self.pid = os.getpid()
        self.base_interval = interval
        self.feed_dir = feed_dir
        self.sock_path = _feeddir.socket_path(feed_dir, self.pid)
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.hub = _server.Hub(self.sock_path)
        self.hub.hello_source = self._encode_hello
        self.server = None  # the serving thread
        self.sampler = None  # the Sampler, once a framework is imported
        self.seq = 0  # the last seq given out (under self.lock)
        self.lock = _thread.allocate_lock()  # seq, outbox and hello, shared between threads
        self.serving = _thread.allocate_lock()  # held by the serving thread but in its waits
        self.outbox = deque()  # ("hello" | "line" | "live" | "kept", payload) for the server
        self.requests = deque()  # (id, seconds, top) of sites requests, for the sampler
        self.pending = deque(maxlen=256)  # oom lines from the job's threads
        self.stopping = None  # the bye reason once asked to stop
        self.pausing = False  # threads stopping for a fork
        self.done = False  # the serving thread has shut the feed down
        self.next_detect = 0.0
        # Not at start: a process that lives less than a second pays nothing for it.
        self.next_sweep = self.started_mono + SWEEP_FIRST
        self.hello_fields = None  # the hello as last built, without time
        self.copy = "imported"
        self._static = {
            "pid": self.pid,
            "agent_version": VERSION,
            "protocol": PROTOCOL,
            # What platform.python_version() says, without importing platform.
            "python": sys.version.split()[0],
            "executable": sys.executable or None,
            "started": self.started,
            "requests": ["sites"],  # the requests this agent answers (PROTOCOL.md, "Requests")
        }
        self.hub.on_request = self._on_request

    # -- life -----------------------------------------------------------------------------

    def open(self):
        err = self.hub.open()
        if err is not None:
            return err
        pkg = sys.modules.get(__package__)
        self.copy = getattr(pkg, "_copy", None) or "imported"
        self._static["agent_path"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self._static["agent_copy"] = self.copy
        self.set_hello(self.idle_hello("no framework imported yet"))
        return None

    def start_threads(self):
        self.server = Thread(self._serve, "strata-feed")
        self.server.start()
        s = self.sampler
        if s is not None and self.stopping is None:
            s.start()

    def alive(self):
        t = self.server
        return t is not None and t.is_alive() and self.stopping is None

    def stop(self, reason):
        self.stopping = reason
        s = self.sampler
        if s is not None:
            s.stop(1.0)
        t = self.server
        if t is not None and not t.is_current() and self.serving.acquire(False):
            # The serving thread is waiting for events (it holds `serving` otherwise): close
            # the feed from here rather than wake it and wait for it (at exit, that wait is
            # most of what the agent costs a short process). It ends at its next wake-up.
            try:
                if not self.done:
                    self._close_feed()
                    self.done = True
                self.wake()
            except BaseException:
                pass
            finally:
                self.serving.release()
            return
        self.wake()
        if t is not None and not t.is_current() and t.is_alive():
            t.join(1.0)
        if not self.done:
            # The thread never ran or is stuck: at least remove the socket so no monitor
            # connects to a feed that is going away.
            self.hub.unlink()

    def pause_for_fork(self):
        """os.fork() is about to run in this process: let both threads end."""
        before = task_count()
        n = 0
        self.pausing = True
        s = self.sampler
        if s is not None and s.running():
            s.stop(1.0)
            n += 1
        t = self.server
        if t is not None and t.is_alive():
            # Without its wake-up pipe (lost) it ends at its next look, LOOK_MAX at most.
            t.join(1.0 if self.wake() else LOOK_MAX + 1.0)
            n += 1
        if before is not None:
            wait_for_threads_to_exit(before - n)

    def resume_after_fork(self):
        """In the parent, after os.fork(): the same feed goes on."""
        self.pausing = False
        if self.stopping is not None:
            return
        t = self.server
        if t is None or not t.is_alive():
            self.start_threads()

    def abandon(self):
        """In a forked child: drop everything inherited, touching nothing of the parent's
        (nor of the job's: a number the job reused is forgotten, not closed)."""
        self.stopping = "fork"
        self.hub.abandon()

    def wake(self):
        """Wakes the serving thread; False when it cannot (no wake-up pipe, or lost)."""
        with self.lock:  # never a write to a closed (and maybe reused) fd: see _close_wake
            return self.hub.wake()

    # -- called from the job's threads ----------------------------------------------------

    def framework_init_hint(self):
        """torch's lazy-init callback: sample as soon as the job's CUDA init completes."""
        s = self.sampler
        if s is not None:
            s.framework_init_hint()

    @property
    def frameworks(self):
        s = self.sampler
        return s.frameworks if s is not None else None

    # -- handing lines to the serving thread (any thread) ---------------------------------

    def set_hello(self, fields):
        """A new hello, if its fields (other than time) changed."""
        with self.lock:
            if fields == self.hello_fields:
                return
            self.hello_fields = fields
            self.outbox.append(("hello", None))
        self.wake()

    def post_line(self, line):
        with self.lock:
            self.outbox.append(("line", line))
        self.wake()

    def post_live(self, line):
        """A line for every monitor connected now, not kept (a sites window begins)."""
        with self.lock:
            self.outbox.append(("live", line))
        self.wake()

    def post_kept(self, key, line):
        """A line for every monitor, kept as the latest of its key for those to come (the
        segment map, a sites window's outcome)."""
        with self.lock:
            self.outbox.append(("kept", (key, line)))
        self.wake()

    def take_requests(self):
        """The requests the monitors made since the last call (the sampler's thread)."""
        if not self.requests:
            return ()
        with self.lock:
            out = list(self.requests)
            self.requests.clear()
        return out

    def _on_request(self, msg):
        """A `sites_request` from a monitor of this user (the serving thread): checked, then
        handed to the sampler, which alone calls torch. A request without a usable id cannot
        be answered and is dropped."""
        rid = msg.get("id")
        if isinstance(rid, bool) or not isinstance(rid, int) or not 0 < rid < 1 << 63:
            return
        seconds = msg.get("seconds", 60)
        top = msg.get("top", 20)
        reason = None
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 1 <= seconds <= 600:
            reason = "invalid request: seconds must be a number from 1 to 600"
        elif isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 50:
            reason = "invalid request: top must be an integer from 1 to 50"
        else:
            if self.sampler is None and self.stopping is None:
                self._detect(time.monotonic())  # a framework imported since the last look
            if self.sampler is None:
                reason = "sites: needs torch (no framework imported yet)"
        if reason is None:
            with self.lock:
                if len(self.requests) < MAX_REQUESTS:
                    self.requests.append((rid, seconds, top))
                    reason = False
            if reason is None:
                reason = "sites: too many requests waiting"
        if reason:
            line = encode({"v": PROTOCOL, "type": "sites", "time": time.time(), "id": rid, "state": "refused",
                           "reason": reason})
            self.hub.publish_kept(("sites", rid), line)
            return
        s = self.sampler
        if s is not None:
            s.wake()

    def post_oom(self, msg):
        """An oom message built on the job's thread: number it, queue it, wake the agent."""
        with self.lock:
            self.seq += 1
            msg["seq"] = self.seq
            line = encode(msg)
            if len(line) <= MADE_LIMIT:
                self.pending.append(line)
        self.wake()

    def next_seq(self):
        """The number of a sample about to be posted, after any oom waiting before it."""
        with self.lock:
            while self.pending:
                self.outbox.append(("line", self.pending.popleft()))
            self.seq += 1
            return self.seq

    def idle_hello(self, note, state="no_framework", error=None):
        return self.build_hello(
            {
                "framework": None,
                "framework_version": None,
                "backend": None,
                "settings": {},
                "devices": [],
            },
            state,
            note,
            error,
        )

    def build_hello(self, fw, state, note, error=None, interval=None):
        fields = dict(self._static)
        fields["interval"] = round(interval or self.base_interval, 6)
        fields.update(fw)
        fields["state"] = state
        fields["note"] = note[:1000] if note else None
        fields["error"] = error[:1000] if error else None
        return fields

    def _encode_hello(self):
        with self.lock:
            fields = self.hello_fields
        if fields is None:
            return None
        msg = {"v": PROTOCOL, "type": "hello", "time": time.time()}
        msg.update(fields)
        line = encode(msg)
        if len(line) > LINE_LIMIT:
            msg["devices"] = msg["devices"][: MAX_DEVICES // 4]
            msg["note"] = "hello too long: devices cut"
            line = encode(msg)
        if len(line) > LINE_LIMIT:
            # Still too long (a long path, a long setting): each long text is cut, so that
            # the monitor can read the hello at all.
            msg = _cut_texts(msg, 512)
            msg["note"] = "hello too long: devices and long texts cut"
            line = encode(msg)
        return line

    # -- the serving thread ---------------------------------------------------------------

    def _serve(self):
        named = False
        hub = self.hub
        try:
            while True:
                with self.serving:
                    if self.stopping is not None or self.pausing:
                        break
                    timeout = self._turn()
                    if not hub.check():  # never a wait on a number that is the job's now
                        self.stopping = LOST
                        break
                events = hub.wait(timeout)
                if not named:
                    # After the first wait, not at start: each system call here would hand
                    # the GIL back and forth with a job that is starting up.
                    name_os_thread("strata-feed")
                    named = True
                with self.serving:
                    if self.stopping is not None or self.pausing:
                        break
                    if events or self.outbox or self.pending:
                        # Before any use: the job may have replaced a number while we waited.
                        if not hub.check():
                            self.stopping = LOST
                            break
                        hub.dispatch(events)
                        self._drain()
        except BaseException:
            pass
        finally:
            if self.stopping is not None:
                s = self.sampler
                if s is not None:
                    s.halt_soon()  # started by this thread after stop() looked: it ends too
                    # Its last words (a sites window the stop ended, history put back) go
                    # out before bye: this thread may have seen `stopping` first.
                    t = s.thread
                    if t is not None and not t.is_current() and t.is_alive() and not self.hub.lost:
                        t.join(1.0)
                with self.serving:
                    try:
                        if not self.done:
                            self._close_feed()
                    except BaseException:
                        pass
                    self.done = True
                    self._close_wake()

    def _turn(self):
        """Looks for a framework and stale sockets when due; the seconds until the next."""
        now = time.monotonic()
        timeout = None
        if self.sampler is None:
            if now >= self.next_detect:
                self._detect(now)
            timeout = self.next_detect - now
        if now >= self.next_sweep:
            self._sweep(now)
        t = min(self.next_sweep - now, LOOK_MAX)
        timeout = t if timeout is None else min(timeout, t)
        return max(0.0, timeout)

    def _detect(self, now):
        mods = sys.modules
        if any(mods.get(name) is not None for name in _FRAMEWORKS):
            from ._sampler import Sampler

            self.sampler = Sampler(self)
            self.sampler.start()
            return
        age = now - self.started_mono
        self.next_detect = now + min(DETECT_MAX, max(DETECT_MIN, age / DETECT_RAMP))

    def _sweep(self, now):
        self.next_sweep = now + SWEEP_PERIOD
        try:
            from . import _sweep

            _sweep.sweep(self.feed_dir, self.pid)
        except Exception:
            pass

    def _drain(self):
        with self.lock:
            items = list(self.outbox)
            self.outbox.clear()
            while self.pending:
                items.append(("line", self.pending.popleft()))
        hub = self.hub
        for kind, payload in items:
            if kind == "hello":
                hub.set_hello(None)
            elif kind == "kept":
                key, line = payload
                if len(line) > MADE_LIMIT:
                    hub.oversized += 1
                else:
                    hub.publish_kept(key, line)
            elif len(payload) > MADE_LIMIT:
                hub.oversized += 1
            elif kind == "live":
                hub.publish_live(payload)
            else:
                hub.publish(payload)

    def _close_feed(self):
        """Sends what is queued, then bye; closes every connection and removes the socket.
        Once the job closed or replaced any of the descriptors, it only forgets them all."""
        hub = self.hub
        if not hub.check():
            hub.forget_all()
        else:
            self._drain()
        if hub.conns:
            reason = self.stopping or "exit"
            bye = encode({"v": PROTOCOL, "type": "bye", "time": time.time(), "reason": reason})
            hub.send_bye_and_close(bye)
        else:
            hub.close_all()
        hub.unlink()

    def _close_wake(self):
        with self.lock:
            self.hub.close_wake()
