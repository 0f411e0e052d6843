"""The listening socket, the monitors' connections, the wake-up pipe and the backlog.

Only the serving thread touches a Hub, but for wake() (under the agent's lock) and at stop;
other threads hand it lines through the agent's outbox. Every socket is non-blocking; sends
use MSG_NOSIGNAL so a monitor that went away can never raise SIGPIPE in a job that restored
the default handler. Built on _socket and select.poll (no socket, selectors, collections or
json import): it costs the job nothing until a monitor connects.

The descriptors are the job's process's, and the job may close or replace any of them at any
time (os.closerange(3, ...) as daemonising code does, os.dup2 over a number): the number then
names one of the job's own files. So the hub records what each descriptor is when it creates
it ((st_dev, st_ino), see identity) and checks it before it uses the number again: every one
before each wait and, when there is something to do, after it (check), each before it is
closed, the wake-up pipe's write end before each write. One that is no longer what the hub opened is lost, and the feed stops
(the agent's serving loop): every number is forgotten (socket.detach(), never close()) and
never used again (forget_all). The two ends of the pipe share one identity: only the agent's
own descriptors could be mistaken for each other, never a file of the job's.

Monitors write requests (PROTOCOL.md, "Requests"): a line of at most REQUEST_LIMIT bytes
(a longer one is dropped up to its newline), answered only for a peer of the agent's own
euid or root (SO_PEERCRED, read at accept). The hub only parses a request and hands it on
(on_request); the answers come back as lines like any other.

select.poll rather than epoll: an epoll object is a descriptor too, with no detach() (a
stale one closes its number when it is collected) and no identity to check (every epoll,
eventfd or timerfd has the same inode). A poll object holds no descriptor; for the few
descriptors the agent has, a wait costs the same. While poll() waits, the kernel holds the
files it waits on, so a monitor whose connection the job closed sees it end only when the
wait returns: the agent waits at most LOOK_MAX seconds at a time (_core).
"""

import _socket
import os
import select
import stat
import sys
import time

from ._threads import deque
from ._wire import backlog_form

QUEUE_LIMIT = 4 * 1024 * 1024  # live bytes waiting for one monitor before it is dropped
BACKLOG_BYTES = 4 * 1024 * 1024
BACKLOG_SECONDS = 15 * 60
MAX_CONNECTIONS = 256
REQUEST_LIMIT = 4096  # bytes of a monitor's line, its newline included
KEPT_SITES = 16  # outcomes of sites windows kept for monitors to come (the latest)
_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0)
_SEND_BATCH = 64
_IN = select.POLLIN
_OUT = select.POLLOUT
_ERR = select.POLLERR | select.POLLHUP | select.POLLNVAL


def identity(fd):
    """What descriptor fd names now, (st_dev, st_ino), or None where it names nothing."""
    try:
        st = os.fstat(fd)
    except (OSError, ValueError, OverflowError):
        return None
    return (st.st_dev, st.st_ino)


def owns(fd, ident):
    """True while descriptor fd still names what had identity ident when the hub made it."""
    return ident is not None and identity(fd) == ident


def release(sock, ident):
    """Closes sock if its number still names what the hub opened (True), else forgets the
    number (False)."""
    if owns(sock.fileno(), ident):
        try:
            sock.close()
        except OSError:
            pass
        return True
    sock.detach()  # the number is the job's now: its object must never close it
    return False


def busy_line(now):
    """What a monitor over the connection limit reads before its connection is closed."""
    return (
        '{"v":1,"type":"busy","time":%.6f,"reason":"busy: %d monitors connected"}\n'
        % (now, MAX_CONNECTIONS)
    ).encode()


def peer_trusted(sock):
    """Whether the peer of a Unix socket runs as this process's euid or as root."""
    try:
        cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        uid = int.from_bytes(cred[4:8], sys.byteorder)  # struct ucred: pid, uid, gid
    except (OSError, AttributeError, ValueError):
        return False
    return uid == 0 or uid == os.geteuid()


class Conn(object):
    __slots__ = ("sock", "fd", "ident", "queue", "offset", "pending", "allow", "want_write", "inbuf",
                 "skipping", "trusted")

    def __init__(self, sock, ident):
        self.sock = sock
        self.fd = sock.fileno()
        self.ident = ident  # identity(fd) when accepted
        self.queue = deque()  # bytes objects, shared with the backlog
        self.offset = 0  # bytes of queue[0] already sent
        self.pending = 0  # bytes waiting
        self.allow = QUEUE_LIMIT
        self.want_write = False
        self.inbuf = b""  # the start of the monitor's line being read
        self.skipping = False  # the line being read is too long: dropped up to its newline
        self.trusted = False  # its requests are answered

    def lines(self, data):
        """The complete lines of at most REQUEST_LIMIT bytes that data completes."""
        out = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                rest = data[start:]
                if not self.skipping:
                    if len(self.inbuf) + len(rest) >= REQUEST_LIMIT:
                        self.inbuf, self.skipping = b"", True
                    else:
                        self.inbuf += rest
                return out
            piece = data[start:nl]
            if self.skipping:
                self.skipping = False
            elif len(self.inbuf) + len(piece) < REQUEST_LIMIT:
                out.append(self.inbuf + piece)
            self.inbuf = b""
            start = nl + 1

    def enqueue(self, line):
        self.queue.append(line)
        self.pending += len(line)
        return self.pending <= self.allow

    def flush(self):
        """Send what the socket takes now. False when the connection is dead."""
        q = self.queue
        while q:
            bufs = []
            for i, b in enumerate(q):
                if i >= _SEND_BATCH:
                    break
                bufs.append(memoryview(b)[self.offset:] if i == 0 else b)
            try:
                sent = self.sock.sendmsg(bufs, (), _NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return False
            if sent <= 0:
                return True  # nothing taken: wait for the socket to be writable
            self.pending -= sent
            while sent:
                head = len(q[0]) - self.offset
                if sent >= head:
                    sent -= head
                    q.popleft()
                    self.offset = 0
                else:
                    self.offset += sent
                    sent = 0
        # Once the initial burst is out, the allowance is the plain limit again.
        self.allow = QUEUE_LIMIT
        return True


class Hub(object):
    def __init__(self, sock_path):
        self.sock_path = sock_path
        self.listener = None
        self.listen_fd = None
        self.listen_id = None  # identity of the listening socket
        self.sock_id = None  # (st_dev, st_ino) of the socket file we bound
        self.wake_r = self.wake_w = None  # the wake-up pipe
        self.wake_id = None  # its identity (both ends have the same)
        self.poll = None  # select.poll: holds no descriptor
        self.lost = False  # a descriptor is no longer what the hub opened: the feed is gone
        self.conns = {}  # fd -> Conn
        self.backlog = deque()  # (monotonic time, backlog-form line)
        self.backlog_bytes = 0
        self.hello = None  # the current hello line, encoded on demand
        self.hello_source = None  # () -> bytes: encodes the current hello
        self.dropped = 0  # monitors closed for falling behind
        self.refused_busy = 0  # monitors turned away at the connection limit
        self.accepted = 0  # connections accepted over the agent's life
        self.oversized = 0  # messages not sent: over the line limit
        self.kept = {}  # key -> backlog-form line: the latest segment map, sites outcomes
        self.on_request = None  # (request dict) -> None, on this thread
        self.requests = 0  # request lines read from trusted monitors
        self.untrusted = 0  # request lines from other users, not answered

    # -- setting up and tearing down ------------------------------------------------------

    def open(self):
        """Bind and listen, make the wake-up pipe. Returns None, or a one-line reason.

        The socket is bound under a temporary name and renamed into place once it listens,
        so `<pid>.sock` never names a socket that refuses connections while its process
        lives: a refused connection is how stale files are told apart (see _sweep).
        """
        path = self.sock_path
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError as e:
            return "cannot stat %s: %s" % (path, e.strerror or e)
        if st is not None and stat.S_ISDIR(st.st_mode):
            return "%s is a directory: remove it" % path
        tmp = os.path.join(os.path.dirname(path), ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
        try:
            os.unlink(tmp)
        except OSError:
            pass
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        pipe = None
        try:
            s.bind(tmp)
            s.listen(64)
            s.setblocking(False)
            listen_id = identity(s.fileno())
            pipe = os.pipe()
            for fd in pipe:
                os.set_blocking(fd, False)
            wake_id = identity(pipe[0])
            if listen_id is None or wake_id is None:
                raise OSError("cannot fstat what was just made")
            poll = select.poll()
            poll.register(s.fileno(), _IN)
            poll.register(pipe[0], _IN)
            # A leftover of an earlier process that had this pid is replaced atomically.
            os.rename(tmp, path)
            st = os.lstat(path)
            self.sock_id = (st.st_dev, st.st_ino)
        except OSError as e:
            # All just made: no job could have had them yet.
            try:
                s.close()
            except OSError:
                pass
            for fd in pipe or ():
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.unlink(tmp)
            except OSError:
                pass
            self.unlink()
            return "cannot listen on %s: %s" % (path, e.strerror or e)
        self.listener, self.listen_fd, self.listen_id = s, s.fileno(), listen_id
        self.wake_r, self.wake_w = pipe
        self.wake_id = wake_id
        self.poll = poll
        return None

    def unlink(self):
        """Remove the socket file, only if it is still the one this process bound."""
        if self.sock_id is None:
            return
        try:
            st = os.lstat(self.sock_path)
            if (st.st_dev, st.st_ino) == self.sock_id:
                os.unlink(self.sock_path)
        except OSError:
            pass
        self.sock_id = None

    def check(self):
        """True while every descriptor the serving thread waits on and uses (the listener,
        the pipe's read end, each connection) is still what the hub opened; the write end is
        checked by wake(). Else the feed is lost (self.lost), and forget_all is what is left
        to do."""
        if self.lost:
            return False
        ok = (self.listener is None or owns(self.listen_fd, self.listen_id)) and (
            self.wake_r is None or owns(self.wake_r, self.wake_id)
        )
        if ok:
            for c in self.conns.values():
                if not owns(c.fd, c.ident):
                    ok = False
                    break
        if not ok:
            self.lost = True
        return ok

    def forget_all(self):
        """Once the feed is lost: forgets every number, closing none, also those still the
        hub's. The job is closing or replacing descriptors at this very moment, and between
        a check and a close it could reuse the number; what the job did not close itself is
        closed when the process exits."""
        self.lost = True
        for c in self.conns.values():
            c.sock.detach()
        self.conns = {}
        if self.listener is not None:
            self.listener.detach()
            self.listener = None
        self.wake_r = self.wake_w = None
        self.poll = None

    def close_all(self):
        """Closes every connection and the listener, each checked just before."""
        for fd in list(self.conns):
            self._close(fd)
        if self.listener is not None:
            release(self.listener, self.listen_id)
            self.listener = None
        self.poll = None  # a waiting serving thread still holds it: it holds no descriptor

    def wake(self):
        """One byte into the wake-up pipe (the agent's lock held). False when there is none:
        it was closed, or lost (then forgotten, and the feed with it)."""
        w = self.wake_w
        if w is None:
            return False
        if not owns(w, self.wake_id):
            self.wake_w = None
            self.lost = True
            return False
        try:
            os.write(w, b"\0")
        except OSError:
            pass  # full (already woken)
        return True

    def close_wake(self):
        """Closes the wake-up pipe (the agent's lock held), forgetting an end that was lost."""
        for fd in (self.wake_r, self.wake_w):
            if fd is not None and not self.lost and owns(fd, self.wake_id):
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.wake_r = self.wake_w = None

    def abandon(self):
        """In a forked child: close our copies of the fds; no shutdown, no unlink."""
        self.sock_id = None
        for c in self.conns.values():
            release(c.sock, c.ident)
        self.conns = {}
        if self.listener is not None:
            release(self.listener, self.listen_id)
        self.listener = None
        self.close_wake()
        self.poll = None
        self.backlog = deque()
        self.backlog_bytes = 0
        self.kept = {}

    # -- events ---------------------------------------------------------------------------

    def _on_accept(self):
        while True:
            try:
                fd, _ = self.listener._accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, fd)
            except OSError:
                os.close(fd)
                continue
            if len(self.conns) >= MAX_CONNECTIONS:
                self.refused_busy += 1
                try:
                    s.setblocking(False)
                    s.send(busy_line(time.time()), _NOSIGNAL)
                except OSError:
                    pass
                s.close()
                continue
            try:
                s.setblocking(False)
                c = Conn(s, identity(fd))
                c.trusted = peer_trusted(s)
                self.conns[c.fd] = c
                self.poll.register(c.fd, _IN)
            except Exception:
                self.conns.pop(fd, None)
                try:
                    s.close()
                except OSError:
                    pass
                continue
            self.accepted += 1
            # hello, then the backlog oldest first, then live messages.
            hello = self.current_hello()
            if hello is not None:
                c.enqueue(hello)
            for _, line in self.backlog:
                c.enqueue(line)
            for line in self.kept.values():
                c.enqueue(line)
            c.allow = QUEUE_LIMIT + c.pending
            self._flush(c)

    def _on_wake(self):
        try:
            while os.read(self.wake_r, 4096):
                pass
        except OSError:
            pass

    def current_hello(self):
        if self.hello is None and self.hello_source is not None:
            try:
                self.hello = self.hello_source()
            except Exception:
                self.hello = None
        return self.hello

    def _on_conn(self, c, mask):
        if mask & (_IN | _ERR):
            # A monitor writes requests, a line each; close on EOF.
            try:
                data = c.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._close(c.fd)
                return
            if data:
                for line in c.lines(data):
                    self._on_line(c, line)
                if c.fd not in self.conns:
                    return
        if mask & _OUT:
            self._flush(c)

    def _on_line(self, c, line):
        """A request line: parsed, and handed on when it is one the agent answers."""
        import json

        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict) or msg.get("v") != 1 or msg.get("type") != "sites_request":
            return  # anything else is ignored, as before requests existed
        if not c.trusted:
            self.untrusted += 1
            return
        self.requests += 1
        if self.on_request is not None:
            try:
                self.on_request(msg)
            except Exception:
                pass

    def _flush(self, c):
        if not c.flush():
            self._close(c.fd)
            return
        want = bool(c.queue)
        if want != c.want_write:
            c.want_write = want
            try:
                self.poll.modify(c.fd, _IN | (_OUT if want else 0))
            except Exception:
                self._close(c.fd)

    def _close(self, fd):
        c = self.conns.pop(fd, None)
        if c is None:
            return
        p = self.poll
        if p is not None:
            try:
                p.unregister(fd)  # poll's own table: no system call
            except Exception:
                pass
        if not release(c.sock, c.ident):
            self.lost = True

    def wait(self, timeout):
        """The events of the next timeout seconds at most (the GIL is released meanwhile).
        The caller checks the descriptors before and after (check)."""
        p = self.poll
        if p is None:
            return ()
        try:
            return p.poll(timeout * 1000.0)
        except (InterruptedError, RuntimeError, ValueError, OverflowError):
            return ()

    def dispatch(self, events):
        listen_fd = self.listen_fd if self.listener is not None else None
        for fd, mask in events:
            if fd == listen_fd:
                self._on_accept()
            elif fd == self.wake_r:
                self._on_wake()
            else:
                c = self.conns.get(fd)
                if c is not None:
                    self._on_conn(c, mask)

    # -- publishing -----------------------------------------------------------------------

    def set_hello(self, line):
        """A new hello (None: encode it from hello_source when a monitor needs it)."""
        self.hello = line
        if self.conns:
            line = self.current_hello()
            if line is not None:
                self._send_all(line)

    def publish(self, line):
        """A sample or an oom: to every monitor now, and into the backlog."""
        self._send_all(line)
        bl = backlog_form(line)
        now = time.monotonic()
        self.backlog.append((now, bl))
        self.backlog_bytes += len(bl)
        while self.backlog and (
            self.backlog_bytes > BACKLOG_BYTES or self.backlog[0][0] < now - BACKLOG_SECONDS
        ):
            _, old = self.backlog.popleft()
            self.backlog_bytes -= len(old)

    def publish_live(self, line):
        """To every monitor connected now; not kept."""
        self._send_all(line)

    def publish_kept(self, key, line):
        """To every monitor now, and kept as the latest line of its key for those to come
        (after the backlog): one segment map, the outcomes of the last KEPT_SITES windows."""
        self._send_all(line)
        self.kept.pop(key, None)
        self.kept[key] = backlog_form(line)
        sites = [k for k in self.kept if k[0] == "sites"]
        for k in sites[: max(0, len(sites) - KEPT_SITES)]:
            del self.kept[k]

    def _send_all(self, line):
        for fd, c in list(self.conns.items()):
            if not c.enqueue(line):
                self.dropped += 1
                self._close(fd)
                continue
            self._flush(c)

    def send_bye_and_close(self, line, linger=0.2):
        """Best effort: queue bye, send for at most `linger` seconds, close everything.
        Every descriptor is checked before each round of sends and its wait; on a loss all
        are forgotten instead (forget_all)."""
        deadline = time.monotonic() + linger
        for c in self.conns.values():
            c.allow = float("inf")
            c.enqueue(line)
        events = [(fd, _OUT) for fd in self.conns]
        while self.check():
            for fd, mask in events:
                c = self.conns.get(fd)
                if c is not None and (mask & _ERR or not c.flush() or not c.queue):
                    self._close(fd)
            left = deadline - time.monotonic()
            if not self.conns or left <= 0:
                break
            # A poll of its own: the serving thread may be waiting in self.poll.
            p = select.poll()
            for fd in self.conns:
                p.register(fd, _OUT)
            try:
                events = p.poll(left * 1000.0)
            except Exception:
                break
        if self.lost:
            self.forget_all()
        else:
            self.close_all()
