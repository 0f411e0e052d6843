"""The agent's threads and wake-ups, on _thread alone.

`threading` (with collections, functools and the rest it pulls in) costs a Python process
2 to 5 ms to import at start-up, and importing it first from a thread other than the main
one would make that thread its idea of the main thread. So the agent never imports it: its
threads are _thread threads that end by releasing a lock (join), name themselves in
/proc (name_os_thread: `top -H`, py-spy and the tests see `strata-feed`,
`strata-feed-sam`), and are listed in AGENT while they run. They are not in
threading.enumerate().
"""

import _thread
import os

try:
    from _collections import deque  # what collections.deque is, without importing collections
except ImportError:  # not CPython
    from collections import deque  # noqa: F401

TIMEOUT_MAX = min(_thread.TIMEOUT_MAX, 3600.0)
AGENT = {}  # thread ident -> name, of the agent's threads while they run


def on_agent_thread():
    """True on one of the agent's threads."""
    return _thread.get_ident() in AGENT


def name_os_thread(name):
    """Names the calling thread for the kernel (/proc/<pid>/task/<tid>/comm)."""
    # The kernel keeps 15 bytes of a thread's name.
    try:
        fd = os.open("/proc/thread-self/comm", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, name.encode("ascii", "replace")[:15])
    except OSError:
        pass
    finally:
        os.close(fd)


class Thread(object):
    """A daemon thread running target(); join() waits for target to return."""

    __slots__ = ("name", "target", "ident", "_done")

    def __init__(self, target, name):
        self.target = target
        self.name = name
        self.ident = None
        self._done = _thread.allocate_lock()  # held while the thread runs

    def start(self):
        self._done.acquire()
        try:
            _thread.start_new_thread(self._run, ())
        except BaseException:
            self._done.release()
            raise

    def _run(self):
        ident = _thread.get_ident()
        try:
            self.ident = ident
            AGENT[ident] = self.name
            self.target()
        except BaseException:
            pass  # never printed into the job's stderr
        finally:
            AGENT.pop(ident, None)
            self._done.release()

    def is_alive(self):
        return self._done.locked()

    def is_current(self):
        return self.ident is not None and self.ident == _thread.get_ident()

    def join(self, timeout):
        """Waits up to timeout seconds for the thread to end; True when it did."""
        if self._done.acquire(True, max(0.0, min(timeout, TIMEOUT_MAX))):
            self._done.release()
            return True
        return False


class Wake(object):
    """An event for one waiting thread: set() from any thread, wait() clears it."""

    __slots__ = ("_lock",)

    def __init__(self):
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # held: not set

    def set(self):
        try:
            self._lock.release()
        except RuntimeError:
            pass  # already set

    def clear(self):
        self._lock.acquire(False)

    def wait(self, timeout):
        """Waits until set() or for timeout seconds; True when set. Clears it."""
        return self._lock.acquire(True, max(0.0, min(timeout, TIMEOUT_MAX)))
