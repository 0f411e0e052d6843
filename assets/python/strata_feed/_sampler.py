"""The sampling thread: waits for the job to initialise its framework, then reads it.

It is the only thread of the agent's that calls into a framework. What it reads it hands to
the serving thread (Agent.set_hello, Agent.post_line), so a framework call that blocks here
delays nothing but the next sample.

It also answers the monitors' requests (a sites window, _sites) and makes the summaries of
snapshots (the segment map, _segmap): long passes run as tasks, a slice at a time between
its samples, the GIL given up after each slice (_slices.give_up_gil).
"""

import time

from . import _context, _frameworks, _steps
from ._slices import give_up_gil
from ._threads import Thread, Wake, deque, name_os_thread
from ._wire import MADE_LIMIT, encode

WARMUP_PERIOD = 0.05  # seconds between samples right after the framework initialised
WARMUP_SECONDS = 5.0
INIT_POLL = 0.002  # after torch's lazy-init callback, until is_initialized() is true
INIT_POLL_SECONDS = 2.0
WAIT_MIN = 0.05  # seconds between looks at an imported, uninitialised framework, at first
WAIT_MAX = 2.0  # ...backing off to this while nothing changes
WAIT_RAMP = 20.0  # the period is the time waited so far divided by this, within the bounds
DUTY = 0.01  # the agent's share of one core, at most, while it samples
MAX_INTERVAL = 120.0

_thread_time_ns = getattr(time, "thread_time_ns", None) or (lambda: 0)


class Timer(object):
    """Times framework calls: each one holds the GIL for its duration."""

    __slots__ = ("max_ns", "excluded_ns")

    def __init__(self):
        self.max_ns = 0
        self.excluded_ns = 0  # CPU time not to count in the duty cycle (rare snapshots)

    def call(self, fn, *args, **kwargs):
        t0 = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            d = time.perf_counter_ns() - t0
            if d > self.max_ns:
                self.max_ns = d


class Sampler(object):
    def __init__(self, agent):
        self.agent = agent
        self.base_interval = agent.base_interval
        self.interval = agent.base_interval  # effective: stretched when sampling is costly
        self.thread = None
        self.halt = False
        self.event = Wake()
        self.cost_est = 0.0  # CPU seconds per tick, as the interval is sized for
        self.since = {}  # device index -> (key, reserved_since) of the previous sample
        self.frameworks = _frameworks.Frameworks(self)
        self.contexts = _context.Contexts()
        self.init_hint = None  # monotonic time torch's lazy-init callback ran
        self.warm_until = None
        self.wait_since = time.monotonic()
        self.wait_key = None
        self.error = None
        self.next_tick = 0.0
        self.sites = None  # the SitesWindow, made at the first request
        self.tasks = deque()  # (Run, done(), halted(reason) or None): sliced passes to make

    # -- life -----------------------------------------------------------------------------

    def start(self):
        self.halt = False
        self.event.clear()
        self.thread = Thread(self._run, "strata-feed-sampler")
        self.thread.start()

    def running(self):
        t = self.thread
        return t is not None and t.is_alive()

    def stop(self, timeout):
        self.halt = True
        _steps.STEPS.reader = None
        self.event.set()
        t = self.thread
        if t is not None and not t.is_current() and t.is_alive():
            t.join(timeout)

    def wake(self):
        self.event.set()

    def halt_soon(self):
        """Ends the thread at its next turn, without waiting for it (any thread)."""
        self.halt = True
        _steps.STEPS.reader = None
        self.event.set()

    # -- called from the job's threads ----------------------------------------------------

    def framework_init_hint(self):
        """torch's lazy-init callback: sample as soon as the job's CUDA init completes."""
        self.init_hint = time.monotonic()
        self.event.set()

    def post_oom(self, msg):
        self.agent.post_oom(msg)

    def reserved_since_for(self, entry, now):
        """For an oom's stats: the last sample's reserved_since if nothing changed since."""
        prev = self.since.get(entry.get("index"))
        key = (entry.get("reserved"), entry.get("device_allocs"), entry.get("device_frees"))
        return prev[1] if prev is not None and prev[0] == key else now

    def in_warmup(self):
        w = self.warm_until
        return w is not None and time.monotonic() < w

    def begin_warmup(self):
        self.warm_until = time.monotonic() + WARMUP_SECONDS

    # -- the thread -----------------------------------------------------------------------

    def _run(self):
        try:
            name_os_thread("strata-feed-sampler")
            while not self.halt:
                now = time.monotonic()
                if now >= self.next_tick or self._init_pending(now):
                    self._tick()
                    continue
                if self._work(now):
                    give_up_gil()  # between two slices of work
                    continue
                timeout = self.next_tick - now
                due = self.sites.due_at() if self.sites is not None else None
                if due is not None:
                    timeout = min(timeout, due - now)
                if self.init_hint is not None:
                    timeout = min(timeout, INIT_POLL)
                self.event.wait(timeout)
        except BaseException:
            pass
        try:
            self._halted()
        except BaseException:
            pass

    # -- requests and sliced work ---------------------------------------------------------

    def _work(self, now):
        """One bounded piece of work besides sampling: the monitors' requests, a window's
        end, one slice of a task. False when there is none."""
        reqs = self.agent.take_requests()
        if reqs:
            if self.frameworks.reader is None:
                # The job may have initialised its framework since the last look: look now,
                # so that a request right after its init is not refused for it.
                self._tick()
            for rid, seconds, top in reqs:
                try:
                    self._sites().request(rid, seconds, top)
                except Exception as e:
                    from ._sites import refusal

                    self.post_sites(refusal(rid, "agent error: %s: %s" % (type(e).__name__, e)), True)
            return True
        due = self.sites.due_at() if self.sites is not None else None
        if due is not None and now >= due:
            try:
                self.tasks.extend(self.sites.finish())
            except Exception as e:
                self.error = "agent error: %s: %s" % (type(e).__name__, e)
            return True
        if self.tasks:
            run, done, halted = self.tasks[0]
            try:
                if not run.step():
                    self.tasks.popleft()
                    done()
            except Exception as e:
                # A summary cut by an error of the agent's is not sent as if whole.
                err = "agent error: %s: %s" % (type(e).__name__, e)
                if self.tasks and self.tasks[0][0] is run:
                    self.tasks.popleft()
                    run.stop()
                    if halted is not None:
                        try:
                            halted(err)
                        except Exception:
                            pass
                self.error = err
            return True
        return False

    def _sites(self):
        if self.sites is None:
            from ._sites import SitesWindow

            self.sites = SitesWindow(self, self.post_sites, self.post_segments)
        return self.sites

    def post_sites(self, msg, keep):
        from ._sites import fit_sites

        line = fit_sites(msg)
        if line is None:
            # Never seen: even without sites it does not fit. The asker still gets an end.
            self.agent.hub.oversized += 1
            if msg.get("state") in ("running", "failed"):
                return
            line = fit_sites({"v": 1, "type": "sites", "time": msg.get("time"), "id": msg.get("id"),
                              "state": "failed", "reason": "the summary does not fit the 64 KiB line"})
        if keep:
            self.agent.post_kept(("sites", msg.get("id")), line)
        else:
            self.agent.post_live(line)

    def post_segments(self, line):
        self.agent.post_kept(("segments",), line)

    def _halted(self):
        """The thread ends. When the agent stops (not for a fork: the window goes on after
        it), a window recording puts history back and says why it ended; the passes being
        made end where they are."""
        why = self.agent.stopping
        if why is None:
            return
        why = {"exit": "the job exited", "stop": "the feed was stopped"}.get(why, "the feed ended (%s)" % why)
        if self.sites is not None:
            self.sites.halt(why)
        while self.tasks:
            run, _, halted = self.tasks.popleft()
            run.stop()
            if halted is not None:
                halted("%s while the window's summary was made" % why)

    def _snapshot_task(self):
        """After a sample: the segment map of the snapshot it took, if it took one."""
        take = getattr(self.frameworks.reader, "take_segments", None)
        got = take() if take is not None else None
        if got is not None:
            from ._sites import segment_run

            segments, when, took = got
            self.tasks.append(segment_run(segments, when, took, None, self.post_segments))

    def _init_pending(self, now):
        h = self.init_hint
        if h is None:
            return False
        if self.frameworks.reader is not None or now - h > INIT_POLL_SECONDS:
            self.init_hint = None
            return False
        return True

    def _tick(self):
        cpu0 = _thread_time_ns()
        timer = Timer()
        sampled = False
        try:
            steps = _steps.STEPS
            # The job's step-end readings and this one, one at a time: those queued were
            # read before this one, so samples go out in the order they were read.
            with steps.lock:
                now = time.time()
                step = steps.count
                entries = self.frameworks.sample(now, timer)
                queued = steps.drain()
            read_ns = _thread_time_ns() - cpu0
            if entries and self._new_device(entries):
                # The hello names a device before any reading of it goes out: a monitor
                # that connected between the two would hold a reading it cannot place.
                self._update_hello()
            reader = self.frameworks.reader
            for when, n, raw, took in queued:
                ends = reader.step_entries(raw, when) if reader is not None else None
                if ends:
                    self._publish_sample(when, ends, took, took, n, True)
            if entries:
                sampled = True
                self._publish_sample(now, entries, read_ns, timer.max_ns, step, False)
                self._read_contexts(reader, entries, timer)
            # Step-end readings once this reader has read (it knows the devices), and only
            # while this agent runs.
            steps.reader = reader if entries and self.agent.stopping is None else None
            self._snapshot_task()
            self.error = None
        except Exception as e:
            self.error = "agent error: %s: %s" % (type(e).__name__, e)
        try:
            self._update_hello()
        except Exception as e:
            self.error = "agent error: %s: %s" % (type(e).__name__, e)
        cost = max(0, _thread_time_ns() - cpu0 - timer.excluded_ns) / 1e9
        self._schedule(cost, sampled)

    def _publish_sample(self, now, entries, read_ns, gil_ns, step, at_step_end):
        since = {}
        for e in entries:
            e["step"] = step
            e["at_step_end"] = at_step_end
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
        msg["seq"] = self.agent.next_seq()
        line = encode(msg)
        if len(line) > MADE_LIMIT:
            self.agent.hub.oversized += 1
            return
        self.agent.post_line(line)

    def _read_contexts(self, reader, entries, timer):
        """The devices' CUDA contexts, read once each while their pools are empty: a one-off
        cost, like set-up, not counted in the duty cycle."""
        cpu0 = _thread_time_ns()
        try:
            self.contexts.update(reader, entries, self.in_warmup())
        except Exception:
            pass
        timer.excluded_ns += _thread_time_ns() - cpu0

    def _new_device(self, entries):
        """Whether a reading is of a device the hello does not name yet."""
        hello = self.agent.hello_fields or {}
        named = {d.get("index") for d in hello.get("devices") or ()}
        return any(e.get("index") not in named for e in entries)

    def _update_hello(self):
        fw = self.frameworks
        fields, state, note = fw.hello_fields()
        if fields.get("devices"):
            fields["devices"] = self.contexts.add_to(fields["devices"])
        if self.error:
            state = "error"
        self.agent.set_hello(self.agent.build_hello(fields, state, note, self.error, self.interval))

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
            # Waiting for the job to initialise its framework. torch wakes the agent itself
            # (the lazy-init hook); JAX and CuPy are looked at, less and less often while
            # nothing changes. A framework that cannot get ready (JAX on the CPU only, a
            # launcher) is looked at rarely.
            key = fw.wait_key()
            if key != self.wait_key:
                self.wait_key = key
                self.wait_since = now
            if fw.hooked:
                delay = max(delay, WAIT_MAX)
            elif fw.settled:
                delay = max(delay, WAIT_MAX * 5)
            else:
                waited = now - self.wait_since
                delay = min(WAIT_MAX, max(WAIT_MIN, waited / WAIT_RAMP))
        if self.warm_until is not None and now < self.warm_until:
            if fw.warm():
                delay = max(min(WARMUP_PERIOD, self.interval), need)
            else:
                self.warm_until = now  # every device holds memory: warm-up is over
        self.next_tick = now + delay
