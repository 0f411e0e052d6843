"""Training steps: counted by torch's global optimizer step post-hook, or by the job calling
strata_feed.step(), with a reading of the allocator at a step's end.

Both run on the job's own thread, at the end of its step, so everything here is short: a
count, and at most once every READ_GAP seconds a reading of the allocator's counters (the
framework's cheapest call, nothing else), queued for the sampler to encode and publish. It
never waits on a lock of the agent's (while the sampler reads, the step takes no reading),
never raises, and never initialises CUDA (a reader reads only devices its last sample
found, and only once the job's CUDA init is done). A reading that costs more than
READ_CPU_LIMIT_NS of CPU, or READ_LIMIT_RUN in a row that take longer than READ_WALL_LIMIT_NS
on the clock, turn step-end readings off for the process; counting goes on.

What counts as a step:
- torch (2.0 and later): a step of one optimizer, the first to step (once it is gone, the
  next one to step): a job with several optimizers that each step once per iteration
  counts iterations, and a step skipped (GradScaler on inf/nan) is not counted.
- strata_feed.step(n=None): a step of the job's own loop (JAX, custom); once the job calls
  it, the torch hook no longer counts.
The count is the process's own (a forked child starts from none).
"""

import _thread
import time

from ._threads import deque

try:
    from _weakref import ref as _ref
except ImportError:  # not CPython
    from weakref import ref as _ref

READ_GAP = 0.2  # seconds between step-end readings, at least
READ_CPU_LIMIT_NS = 1000000  # a step-end reading that costs more CPU (1 ms) turns them off,
READ_WALL_LIMIT_NS = 1000000  # ...and so do READ_LIMIT_RUN in a row that take longer (1 ms)
READ_LIMIT_RUN = 3  # on the clock (one alone can be a preemption)
QUEUE = 64  # step-end readings waiting for the sampler, at most
_cpu_ns = getattr(time, "thread_time_ns", None) or (lambda: 0)

# Once per process: whether the torch hook is registered, or why it is not.
torch_hook = None  # None: not looked at yet; True: registered; a string: why not


class Steps(object):
    def __init__(self):
        self.count = None  # steps completed; None until the first one
        self.manual = False  # the job counts with strata_feed.step()
        self.lead = None  # weak reference to the optimizer whose steps are counted
        self.reader = None  # the framework reader of a running agent (step_read), or None
        self.lock = _thread.allocate_lock()  # one reading at a time: a step's or a sample's
        self.next_read = 0.0  # monotonic time from which a step may take a reading
        self.readings = deque(maxlen=QUEUE)  # (time, step, raw reading, read ns)
        self.off = None  # why step-end readings stopped
        self.read_max_ns = 0
        self.slow = 0  # readings over READ_WALL_LIMIT_NS in a row

    # -- on the job's thread ------------------------------------------------------------

    def optimizer_step(self, optimizer):
        if self.manual:
            return
        lead = self.lead
        current = lead() if lead is not None else None
        if current is None:
            try:
                self.lead = _ref(optimizer)
            except TypeError:
                self.lead = None  # not weakly referable: every step of it counts
        elif current is not optimizer:
            return
        self.count = (self.count or 0) + 1
        self.end_of_step()

    def job_step(self, n):
        self.manual = True
        self.count = (self.count or 0) + 1 if n is None else n
        self.end_of_step()

    def end_of_step(self):
        reader = self.reader
        if reader is None or self.off is not None:
            return
        now = time.monotonic()
        if now < self.next_read:
            return
        if not self.lock.acquire(False):
            return  # the sampler is reading: never wait for it
        try:
            self.next_read = now + READ_GAP
            t0 = time.perf_counter_ns()
            c0 = _cpu_ns()
            when = time.time()
            try:
                raw = reader.step_read()
            except Exception as e:
                raw = None
                self.off = "step-end readings stopped: %s: %s" % (type(e).__name__, str(e)[:200])
            cpu = _cpu_ns() - c0
            took = time.perf_counter_ns() - t0
            if raw:
                self.readings.append((when, self.count, raw, took))
            if took > self.read_max_ns:
                self.read_max_ns = took
            self.slow = self.slow + 1 if took > READ_WALL_LIMIT_NS else 0
            if self.off is None and cpu > READ_CPU_LIMIT_NS:
                self.off = "step-end readings stopped: one cost %.1f ms of CPU (at most %g ms)" % (
                    cpu / 1e6,
                    READ_CPU_LIMIT_NS / 1e6,
                )
            elif self.off is None and self.slow >= READ_LIMIT_RUN:
                self.off = "step-end readings stopped: %d in a row took over %g ms, the last %.1f ms" % (
                    self.slow,
                    READ_WALL_LIMIT_NS / 1e6,
                    took / 1e6,
                )
        finally:
            self.lock.release()

    # -- on the sampler's thread (holding self.lock) -------------------------------------

    def drain(self):
        out = []
        q = self.readings
        while q:
            out.append(q.popleft())
        return out


STEPS = Steps()


def on_optimizer_step(optimizer, args, kwargs):
    """torch's global optimizer step post-hook: hook(optimizer, args, kwargs) -> None."""
    try:
        STEPS.optimizer_step(optimizer)
    except Exception:
        pass  # an exception here would fail the job's optimizer.step()


def after_fork_in_child():
    global STEPS
    STEPS = Steps()


def register_torch_hook(torch_version):
    """Registers on_optimizer_step as torch's global step post-hook, once per process.
    Called on the sampler's thread once torch is imported; touches no CUDA state.

    torch calls the global hooks by iterating a dict; a hook added while a step of the
    job's is iterating it would make that step fail ("dictionary changed size during
    iteration"). Added to an empty dict it cannot: torch reaches the global hooks in one
    C call that finds none or ours. So when the job (or a library) has global post-hooks
    of its own, none is added, and the hello's note says so."""
    global torch_hook
    if torch_hook is True:
        return torch_hook
    import sys

    optim = sys.modules.get("torch.optim.optimizer")
    spec = getattr(optim, "__spec__", None)
    if optim is None or getattr(spec, "_initializing", False):
        return None  # not imported yet: looked at again later
    register = getattr(optim, "register_optimizer_step_post_hook", None)
    hooks = getattr(optim, "_global_optimizer_post_hooks", None)
    if not callable(register) or not isinstance(hooks, dict):
        torch_hook = "steps not counted: torch %s has no global optimizer step hook (torch 2.0 and later have it)" % torch_version
        return torch_hook
    if hooks:
        torch_hook = "steps not counted: the job has global optimizer step hooks of its own (one added now could fail a step running them)"
        return None  # looked at again: they may go
    register(on_optimizer_step)
    torch_hook = True
    return torch_hook
