"""Removing the sockets of dead processes from the feed dir.

A process that ends without atexit (os._exit in a multiprocessing fork child, SIGTERM,
SIGKILL) leaves its `<pid>.sock` behind. Each agent looks in its feed dir when it starts and
then every minute, and removes a socket file only when all of these hold:
- it is named `<pid>.sock`, is a socket, and belongs to this uid;
- its pid is not a live process in this PID namespace (a live one is never touched, even if
  it is some other process that reused the pid);
- connecting to it is refused (ECONNREFUSED): no process listens on it, in any namespace.
  An agent binds under a temporary name and renames its socket into place only once it
  listens, so a live agent's socket never refuses.
Temporary names (`.<pid>.sock.<pid>.tmp`) older than a minute are removed too: a bind and
rename takes microseconds.
"""

import _socket
import errno
import os
import stat
import time

TMP_AGE = 60.0


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    except OSError:
        return True


def _refused(path):
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.setblocking(False)
        s.connect(path)
        return False
    except OSError as e:
        return e.errno == errno.ECONNREFUSED
    finally:
        s.close()


def sweep(feed_dir, own_pid):
    """Removes stale sockets; returns the names removed."""
    removed = []
    uid = os.geteuid()
    try:
        names = os.listdir(feed_dir)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        path = os.path.join(feed_dir, name)
        if name.endswith(".sock"):
            head = name[:-5]
            if not head.isdigit() or int(head) == own_pid:
                continue
            pid = int(head)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid or _alive(pid):
                continue
            if not _refused(path):
                continue
            try:
                # Still the same file (not replaced by a new agent meanwhile)?
                st2 = os.lstat(path)
                if (st2.st_dev, st2.st_ino) == (st.st_dev, st.st_ino):
                    os.unlink(path)
                    removed.append(name)
            except OSError:
                pass
        elif name.startswith(".") and name.endswith(".tmp"):
            try:
                st = os.lstat(path)
                if stat.S_ISSOCK(st.st_mode) and st.st_uid == uid and now - st.st_mtime > TMP_AGE:
                    os.unlink(path)
                    removed.append(name)
            except OSError:
                pass
    return removed
