"""The listening socket, the monitors' connections and the backlog.

Only the serving thread touches a Hub; other threads hand it lines through the agent's
outbox. Every socket is non-blocking; sends use MSG_NOSIGNAL so a monitor that went away can
never raise SIGPIPE in a job that restored the default handler. Built on _socket and
select.epoll (no socket, selectors, collections or json import): it costs the job
nothing until a monitor connects.
"""

import _socket
import os
import select
import stat
import time

from ._threads import deque

QUEUE_LIMIT = 4 * 1024 * 1024  # live bytes waiting for one monitor before it is dropped
BACKLOG_BYTES = 4 * 1024 * 1024
BACKLOG_SECONDS = 15 * 60
MAX_CONNECTIONS = 256
_BACKLOG_TAIL = b',"backlog":true}\n'
_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0)
_SEND_BATCH = 64
_IN = select.EPOLLIN
_OUT = select.EPOLLOUT
_ERR = select.EPOLLERR | select.EPOLLHUP


def backlog_form(line):
    """The same message with "backlog": true (line is one JSON object ending in "}\\n")."""
    return line[:-2] + _BACKLOG_TAIL


def busy_line(now):
    """What a monitor over the connection limit reads before its connection is closed."""
    return (
        '{"v":1,"type":"busy","time":%.6f,"reason":"busy: %d monitors connected"}\n'
        % (now, MAX_CONNECTIONS)
    ).encode()


class Conn(object):
    __slots__ = ("sock", "fd", "queue", "offset", "pending", "allow", "want_write")

    def __init__(self, sock):
        self.sock = sock
        self.fd = sock.fileno()
        self.queue = deque()  # bytes objects, shared with the backlog
        self.offset = 0  # bytes of queue[0] already sent
        self.pending = 0  # bytes waiting
        self.allow = QUEUE_LIMIT
        self.want_write = False

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
        self.sock_id = None  # (st_dev, st_ino) of the socket file we bound
        self.poll = None
        self.conns = {}  # fd -> Conn
        self.backlog = deque()  # (monotonic time, backlog-form line)
        self.backlog_bytes = 0
        self.hello = None  # the current hello line, encoded on demand
        self.hello_source = None  # () -> bytes: encodes the current hello
        self.dropped = 0  # monitors closed for falling behind
        self.refused_busy = 0  # monitors turned away at the connection limit
        self.accepted = 0  # connections accepted over the agent's life
        self.oversized = 0  # messages not sent: over the line limit
        self.on_wake = None  # called when the wake-up fd is readable
        self.wake_fd = None

    # -- setting up and tearing down ------------------------------------------------------

    def open(self):
        """Bind and listen. Returns None, or a one-line reason.

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
        try:
            s.bind(tmp)
            s.listen(64)
            s.setblocking(False)
            # A leftover of an earlier process that had this pid is replaced atomically.
            os.rename(tmp, path)
            st = os.lstat(path)
            self.sock_id = (st.st_dev, st.st_ino)
            self.poll = select.epoll()
            self.poll.register(s.fileno(), _IN)
        except OSError as e:
            try:
                s.close()
            except OSError:
                pass
            for p in (tmp,):
                try:
                    os.unlink(p)
                except OSError:
                    pass
            self.unlink()
            return "cannot listen on %s: %s" % (path, e.strerror or e)
        self.listener = s
        return None

    def add_wake(self, fd, callback):
        self.wake_fd = fd
        self.on_wake = callback
        self.poll.register(fd, _IN)

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

    def close_all(self):
        for fd in list(self.conns):
            self._close(fd)
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
            self.listener = None
        if self.poll is not None:
            try:
                self.poll.close()
            except Exception:
                pass
            self.poll = None

    def abandon(self):
        """In a forked child: close our copies of the fds; no shutdown, no unlink."""
        self.sock_id = None
        for c in self.conns.values():
            try:
                c.sock.close()
            except OSError:
                pass
        self.conns = {}
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
        self.listener = None
        if self.poll is not None:
            try:
                self.poll.close()
            except Exception:
                pass
            self.poll = None
        self.backlog = deque()
        self.backlog_bytes = 0

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
                c = Conn(s)
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
            c.allow = QUEUE_LIMIT + c.pending
            self._flush(c)

    def current_hello(self):
        if self.hello is None and self.hello_source is not None:
            try:
                self.hello = self.hello_source()
            except Exception:
                self.hello = None
        return self.hello

    def _on_conn(self, c, mask):
        if mask & (_IN | _ERR):
            # Monitors never write; read and discard, close on EOF.
            try:
                data = c.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._close(c.fd)
                return
        if mask & _OUT:
            self._flush(c)

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
        try:
            self.poll.unregister(fd)
        except Exception:
            pass
        try:
            c.sock.close()
        except OSError:
            pass

    def select(self, timeout):
        """Wait up to timeout seconds and dispatch what happened."""
        self.dispatch(self.wait(timeout))

    def wait(self, timeout):
        """The events of the next timeout seconds at most (the GIL is released meanwhile)."""
        p = self.poll
        if p is None:
            return ()
        try:
            return p.poll(timeout)
        except (InterruptedError, ValueError):
            return ()  # ValueError: the poll was closed under us (the feed stopped)

    def dispatch(self, events):
        listen_fd = self.listener.fileno() if self.listener is not None else None
        for fd, mask in events:
            if fd == listen_fd:
                self._on_accept()
            elif fd == self.wake_fd:
                self.on_wake()
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

    def _send_all(self, line):
        for fd, c in list(self.conns.items()):
            if not c.enqueue(line):
                self.dropped += 1
                self._close(fd)
                continue
            self._flush(c)

    def send_bye_and_close(self, line, linger=0.2):
        """Best effort: queue bye, send for at most `linger` seconds, close everything."""
        deadline = time.monotonic() + linger
        for fd, c in list(self.conns.items()):
            c.allow = float("inf")
            c.enqueue(line)
            if not c.flush() or not c.queue:
                self._close(fd)
        while self.conns and time.monotonic() < deadline:
            for c in self.conns.values():
                try:
                    self.poll.modify(c.fd, _OUT)
                except Exception:
                    pass
            try:
                events = self.poll.poll(max(0.0, deadline - time.monotonic()))
            except Exception:
                break
            for fd, mask in events:
                c = self.conns.get(fd)
                if c is not None and mask & (_OUT | _ERR):
                    if not c.flush() or not c.queue or mask & _ERR:
                        self._close(fd)
        self.close_all()
