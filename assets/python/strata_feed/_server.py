"""The listening socket, the monitors' connections and the backlog.

Only the agent thread touches a Hub (other threads hand lines to the agent, which publishes
them). Every socket is non-blocking; sends use MSG_NOSIGNAL so a monitor that went away can
never raise SIGPIPE in a job that restored the default handler.
"""

import collections
import os
import selectors
import socket
import stat
import time

QUEUE_LIMIT = 4 * 1024 * 1024  # live bytes waiting for one monitor before it is dropped
BACKLOG_BYTES = 4 * 1024 * 1024
BACKLOG_SECONDS = 15 * 60
MAX_CONNECTIONS = 256
_BACKLOG_TAIL = b',"backlog":true}\n'
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_SEND_BATCH = 64


def backlog_form(line):
    """The same message with "backlog": true (line is one JSON object ending in "}\\n")."""
    return line[:-2] + _BACKLOG_TAIL


class Conn(object):
    __slots__ = ("sock", "queue", "offset", "pending", "allow", "want_write")

    def __init__(self, sock):
        self.sock = sock
        self.queue = collections.deque()  # bytes objects, shared with the backlog
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
        self.sel = None
        self.conns = {}  # fd -> Conn
        self.backlog = collections.deque()  # (monotonic time, backlog-form line)
        self.backlog_bytes = 0
        self.hello = None  # the current hello line
        self.dropped = 0  # monitors closed for falling behind
        self.oversized = 0  # messages not sent: over the line limit

    # -- setting up and tearing down ------------------------------------------------------

    def open(self):
        """Bind and listen. Returns None, or a one-line reason."""
        path = self.sock_path
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError as e:
            return "cannot stat %s: %s" % (path, e.strerror or e)
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                return "%s is a directory: remove it" % path
            try:
                # A leftover of an earlier process that had this pid.
                os.unlink(path)
            except OSError as e:
                return "cannot remove stale %s: %s" % (path, e.strerror or e)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(path)
            st = os.lstat(path)
            self.sock_id = (st.st_dev, st.st_ino)
            s.listen(64)
            s.setblocking(False)
            self.sel = selectors.DefaultSelector()
            self.sel.register(s, selectors.EVENT_READ, self._on_accept)
        except OSError as e:
            try:
                s.close()
            except OSError:
                pass
            self.unlink()
            return "cannot listen on %s: %s" % (path, e.strerror or e)
        self.listener = s
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

    def close_all(self):
        for fd in list(self.conns):
            self._close(fd)
        if self.listener is not None:
            try:
                self.sel.unregister(self.listener)
            except Exception:
                pass
            try:
                self.listener.close()
            except OSError:
                pass
            self.listener = None
        if self.sel is not None:
            try:
                self.sel.close()
            except Exception:
                pass
            self.sel = None

    def abandon(self):
        """In a forked child: close our copies of the fds; no shutdown, no unlink."""
        self.sock_id = None
        for c in self.conns.values():
            try:
                c.sock.close()
            except OSError:
                pass
        self.conns = {}
        for s in (self.listener,):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self.listener = None
        if self.sel is not None:
            try:
                self.sel.close()
            except Exception:
                pass
            self.sel = None
        self.backlog = collections.deque()
        self.backlog_bytes = 0

    # -- events ---------------------------------------------------------------------------

    def _on_accept(self, mask):
        while True:
            try:
                s, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if len(self.conns) >= MAX_CONNECTIONS:
                s.close()
                continue
            try:
                s.setblocking(False)
                c = Conn(s)
                self.conns[s.fileno()] = c
                self.sel.register(s, selectors.EVENT_READ, self._on_conn)
            except Exception:
                try:
                    s.close()
                except OSError:
                    pass
                continue
            # hello, then the backlog oldest first, then live messages.
            if self.hello is not None:
                c.enqueue(self.hello)
            for _, line in self.backlog:
                c.enqueue(line)
            c.allow = QUEUE_LIMIT + c.pending
            self._flush(c)

    def _on_conn(self, mask, key):
        fd = key.fd
        c = self.conns.get(fd)
        if c is None:
            return
        if mask & selectors.EVENT_READ:
            # Monitors never write; read and discard, close on EOF.
            try:
                data = c.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                self._close(fd)
                return
        if mask & selectors.EVENT_WRITE:
            self._flush(c)

    def _flush(self, c):
        fd = c.sock.fileno()
        if not c.flush():
            self._close(fd)
            return
        want = bool(c.queue)
        if want != c.want_write:
            c.want_write = want
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            try:
                self.sel.modify(c.sock, events, self._on_conn)
            except Exception:
                self._close(fd)

    def _close(self, fd):
        c = self.conns.pop(fd, None)
        if c is None:
            return
        try:
            self.sel.unregister(c.sock)
        except Exception:
            pass
        try:
            c.sock.close()
        except OSError:
            pass

    def select(self, timeout):
        """Wait up to timeout seconds and dispatch what happened."""
        for key, mask in self.sel.select(timeout):
            cb = key.data
            if cb == self._on_conn:
                cb(mask, key)
            else:
                cb(mask)

    # -- publishing -----------------------------------------------------------------------

    def set_hello(self, line):
        self.hello = line
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
            if not c.flush():
                self._close(fd)
        while self.conns and time.monotonic() < deadline:
            waiting = [c for c in self.conns.values() if c.queue]
            if not waiting:
                break
            for c in waiting:
                c.want_write = True
                try:
                    self.sel.modify(c.sock, selectors.EVENT_WRITE, self._on_conn)
                except Exception:
                    pass
            try:
                events = self.sel.select(max(0.0, deadline - time.monotonic()))
            except Exception:
                break
            for key, mask in events:
                c = self.conns.get(key.fd)
                if c is not None and mask & selectors.EVENT_WRITE:
                    if not c.flush() or not c.queue:
                        self._close(key.fd)
        self.close_all()
