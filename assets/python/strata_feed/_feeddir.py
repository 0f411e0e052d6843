"""The feed dir: which, created 0700, refused when its owner or mode is wrong."""

import os
import stat

# sockaddr_un.sun_path holds 108 bytes, the terminating NUL included.
_SUN_PATH_MAX = 107


def resolve(feed_dir=None):
    if feed_dir:
        return os.path.abspath(os.fspath(feed_dir))
    env = os.environ.get("STRATA_FEED_DIR")
    if env:
        return os.path.abspath(env)
    return "/tmp/strata-%d" % os.geteuid()


def prepare(feed_dir=None):
    """Returns (path, None) when the dir is usable, else (None, one-line reason)."""
    path = resolve(feed_dir)
    euid = os.geteuid()
    try:
        os.mkdir(path, 0o700)
        # mkdir's mode went through the umask; set it exactly.
        os.chmod(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return None, "cannot create feed dir %s: %s" % (path, e.strerror or e)
    try:
        st = os.lstat(path)
    except OSError as e:
        return None, "cannot stat feed dir %s: %s" % (path, e.strerror or e)
    if stat.S_ISLNK(st.st_mode):
        return None, (
            "feed dir %s is a symbolic link, not a directory: remove it (rm %s) and "
            "strata_feed creates the directory" % (path, path)
        )
    if not stat.S_ISDIR(st.st_mode):
        return None, "feed dir %s is not a directory: remove it (rm %s)" % (path, path)
    if st.st_uid != euid:
        return None, (
            "feed dir %s is owned by uid %d, not by this process's uid %d: remove it, or "
            "set STRATA_FEED_DIR to a directory of your own" % (path, st.st_uid, euid)
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        return None, "feed dir %s has mode %04o, must be 0700: chmod 700 %s" % (path, mode, path)
    sock = socket_path(path, os.getpid())
    if len(os.fsencode(sock)) > _SUN_PATH_MAX:
        return None, (
            "socket path %s is too long for a Unix socket (at most %d bytes): set "
            "STRATA_FEED_DIR to a shorter directory" % (sock, _SUN_PATH_MAX)
        )
    return path, None


def socket_path(feed_dir, pid):
    return os.path.join(feed_dir, "%d.sock" % pid)


def clean_interval(value, default=0.5):
    """Seconds between samples: a finite number, clamped to [0.01, 3600]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return default
    if v != v or v in (float("inf"), float("-inf")):  # math.isfinite, without importing math
        return default
    return min(max(v, 0.01), 3600.0)
