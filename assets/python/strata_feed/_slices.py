"""Work on the agent's thread that holds the GIL in slices: a long pass over a snapshot
(the segment map, a sites window's summary) is a generator that yields whenever its Clock
says the slice is over, and a Run drives it one slice at a time. Between two slices the
driver gives the GIL up (give_up_gil) and may sample, so the job's threads never wait on
the agent for more than a slice.

give_up_gil sleeps YIELD seconds, not 0: on Python 3.9 time.sleep(0) releases the GIL and
takes it back before a thread that waits for it can run (a spinning thread made no progress
between 99 of 99 slices; 3.11 hands it over), while a sleep of 100 µs lets it run on every
version tested (3.9, 3.11 to 3.13).

A leaf: it imports nothing of the agent's.
"""

import time

SLICE = 0.002  # seconds of work in one slice, at most (checked every few items)
YIELD = 0.0001  # seconds the agent's thread sleeps between two slices
CHECK_EVERY = 8  # items between two looks at the clock

_perf_ns = time.perf_counter_ns
_cpu_ns = getattr(time, "thread_time_ns", None) or (lambda: 0)


class Clock(object):
    """Tells a generator when its slice is over. `heavy` is set by work that costs more
    than an ordinary item (a long text looked at for the first time): the clock is then
    read at the next due() whatever the count."""

    __slots__ = ("n", "deadline", "heavy", "slice_ns")

    def __init__(self, slice_s=SLICE):
        self.n = 0
        self.heavy = False
        self.slice_ns = int(slice_s * 1e9)
        self.deadline = 0

    def start(self):
        self.n = 0
        self.heavy = False
        self.deadline = _perf_ns() + self.slice_ns

    def due(self):
        self.n += 1
        if self.n < CHECK_EVERY and not self.heavy:
            return False
        self.n = 0
        self.heavy = False
        return _perf_ns() >= self.deadline


class Run(object):
    """Runs gen (a generator driven by clock) one slice per step(). Measures each slice:
    its wall time (the GIL held for it: the agent's thread never waits inside a slice) and
    the thread's CPU. Past `budget` seconds of CPU it closes the generator (which keeps
    what it made so far) and says so in over_budget."""

    __slots__ = ("gen", "clock", "budget_ns", "cpu_ns", "hold_max_ns", "slices", "over_budget",
                 "finished", "record")

    def __init__(self, gen, clock, budget=None, record=False):
        self.gen = gen
        self.clock = clock
        self.budget_ns = None if budget is None else int(budget * 1e9)
        self.cpu_ns = 0
        self.hold_max_ns = 0
        self.slices = 0
        self.over_budget = False
        self.finished = False
        self.record = [] if record else None  # (wall ns, cpu ns) of each slice, for tests

    def step(self):
        """One slice. True while work remains."""
        if self.finished:
            return False
        c0 = _cpu_ns()
        t0 = _perf_ns()
        self.clock.start()
        try:
            next(self.gen)
            more = True
        except StopIteration:
            more = False
        hold = _perf_ns() - t0
        cpu = _cpu_ns() - c0
        self.slices += 1
        self.cpu_ns += cpu
        if hold > self.hold_max_ns:
            self.hold_max_ns = hold
        if self.record is not None:
            self.record.append((hold, cpu))
        if more and self.budget_ns is not None and self.cpu_ns >= self.budget_ns:
            self.over_budget = True
            self.gen.close()
            more = False
        if not more:
            self.finished = True
        return more

    def stop(self):
        """Ends the work where it is (the agent is stopping)."""
        if not self.finished:
            self.finished = True
            self.gen.close()

    def to_end(self, pause=None):
        """Every slice, with pause() (default: the GIL given up) between two."""
        pause = pause or give_up_gil
        while self.step():
            pause()
        return self


def give_up_gil():
    """Lets the job's threads that wait for the GIL run before the next slice."""
    time.sleep(YIELD)
