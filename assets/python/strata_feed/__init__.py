"""strata_feed: publish this process's GPU allocator statistics to strata.

    import strata_feed
    strata_feed.start()          # idempotent, never raises, returns True when the feed runs
    strata_feed.step()           # optional: the end of a training step, for a loop with no
                                 # torch optimizer (torch's optimizer steps are counted)
    strata_feed.stop()           # optional: atexit stops it too

Standard library only. The agent never imports a framework and never initialises CUDA: it
looks for torch, jax or cupy in sys.modules and reads them only once the job itself has
initialised them. The wire protocol is PROTOCOL.md beside this package.

Importing this package costs little (os and sys); start() loads the rest.
"""

import _thread
import os
import sys

__version__ = "0.1.0"
PROTOCOL = 1  # the feed protocol version, "v" of every message
MAX_DEVICES = 64  # devices per message, at most
__all__ = ["start", "step", "stop", "info"]

_lock = _thread.allocate_lock()
_agent = None  # the running Agent of this process, or None
_warned = False  # at most one line on stderr over the process's life
_last_error = None
_atexit_registered = False
_copy = None  # set by strata_run's sitecustomize: which copy of the agent this is


def start(interval=0.5, feed_dir=None):
    """Start the feed (once per process). Returns True when it runs, False when it cannot."""
    global _agent, _atexit_registered
    try:
        with _lock:
            a = _agent
            if a is not None and a.pid == os.getpid() and a.alive():
                return True
            from . import _feeddir

            path, err = _feeddir.prepare(feed_dir)
            if err is None:
                from . import _core

                a = _core.Agent(_feeddir.clean_interval(interval), path)
                err = a.open()
            if err is not None:
                _fail(err)
                return False
            a.start_threads()
            _agent = a
            if not _atexit_registered:
                import atexit

                atexit.register(_at_exit)
                _atexit_registered = True
            return True
    except Exception as e:  # never reach the job
        try:
            _fail("internal error, feed not started: %s: %s" % (type(e).__name__, e))
        except Exception:
            pass
        return False


def step(n=None):
    """The end of a training step of the job's own loop (JAX, custom): counts it, and takes
    a reading of the allocator now if none was taken in the last 0.2 s. `n`, when given, is
    the number of steps completed so far (an int >= 0, e.g. after resuming from a
    checkpoint). Once the job calls this, torch's optimizer steps are no longer counted.
    Cheap (about a microsecond without a reading), never raises, returns None."""
    try:
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            _fail("strata_feed.step(n): n must be an int >= 0, not %r: counted as one more step" % (n,))
            n = None
        steps = sys.modules.get(__name__ + "._steps")
        if steps is None or getattr(getattr(steps, "__spec__", None), "_initializing", False):
            # Not imported yet, or the agent's thread is importing it now: the import
            # statement waits for a module another thread is making (a step is not lost).
            from . import _steps as steps
        steps.STEPS.job_step(n)
    except Exception:
        pass


def stop():
    """Stop the feed: send `bye`, close the connections and remove the socket."""
    _stop("stop")


def info():
    """A small dict about this process's feed: running, pid, socket, error, copy."""
    try:
        a = _current()
        lost = None
        if a is not None and a.hub.lost:  # the job closed or replaced the feed's descriptors
            from ._core import LOST as lost
        return {
            "running": a is not None and a.alive(),
            "pid": os.getpid(),
            "socket": a.sock_path if a is not None else None,
            "error": _last_error or lost,
            "version": __version__,
            "path": os.path.dirname(os.path.abspath(__file__)),
        }
    except Exception:
        return {"running": False, "pid": None, "socket": None, "error": "info failed"}


def _current():
    """The running agent of this very process (never a parent's copy after fork)."""
    a = _agent
    if a is not None and a.pid == os.getpid():
        return a
    return None


def _stop(reason):
    global _agent
    try:
        with _lock:
            a = _agent
            _agent = None
        if a is not None and a.pid == os.getpid():
            a.stop(reason)
        elif a is not None:
            a.abandon()  # a child forked without the fork hooks (fork() in C): as they would
    except Exception:
        pass


def _at_exit():
    try:
        _stop("exit")
    except BaseException:
        pass


def _fail(message):
    global _warned, _last_error
    message = " ".join(str(message).split())
    _last_error = message
    if _warned:
        return
    _warned = True
    try:
        err = sys.stderr
        if err is not None:
            err.write("strata_feed: " + message + "\n")
            err.flush()
    except Exception:
        pass


def _before_fork():
    # os.fork() is about to run (os.fork, multiprocessing's fork start method, a forkserver):
    # the agent's threads end first, so the fork sees none of them (Python 3.12+ warns
    # about forking a multi-threaded process) and the child inherits no thread state.
    try:
        a = _current()
        if a is not None:
            a.pause_for_fork()
    except BaseException:
        pass


def _after_fork_in_parent():
    try:
        a = _current()
        if a is not None:
            a.resume_after_fork()
    except BaseException:
        pass


def _after_fork_in_child():
    # The agent's threads do not exist here; the inherited sockets are the parent's: close
    # our copies without shutdown() and without unlinking the parent's socket file. The
    # child has no feed until it calls start() itself.
    global _agent, _lock
    try:
        steps = sys.modules.get(__name__ + "._steps")
        if steps is not None:
            steps.after_fork_in_child()  # the parent's steps are not the child's
    except BaseException:
        pass
    try:
        _lock = _thread.allocate_lock()
        a = _agent
        _agent = None
        if a is not None:
            a.abandon()
    except BaseException:
        pass


try:
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
except Exception:
    pass
