"""What a driven job (jobs/driven.py) does with descriptors for test_descriptors.py: files
of its own with known content, the agent's descriptors as the job sees them, a child that
execs a writer. The job opens no descriptor of its own but these files."""

import atexit
import json
import os
import sys

DUPS = []  # (number, path, (st_dev, st_ino)) of the job's files put over the agent's numbers
REPORT = None  # where at_exit writes what it found


def content(i):
    """What the job writes into its file i (under the 8 KiB of a file's buffer)."""
    return "file %d: the job's own bytes, every one of them\n" % i * 4


def head(i):
    """What a file of the job's holds before the job puts it over one of the agent's numbers;
    as long as content(i), which the job then writes over it from offset 0."""
    text = "head %d: " % i
    return (text * (len(content(i)) // len(text) + 1))[: len(content(i)) - 1] + "\n"


def agent_fds():
    """The descriptors above 2 that are sockets, pipes or anonymous inodes (epoll): in a
    driven job, which opens none of its own, they are the agent's."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2:
            continue
        try:
            target = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            continue  # listdir's own
        if target.startswith(("socket:", "pipe:", "anon_inode:")):
            out.append(fd)
    return sorted(out)


def buffered_files(d, n):
    """n files under d, each with content(i) in its buffer only: flushed at the job's exit."""
    files = []
    for i in range(n):
        f = open(os.path.join(d, "file%d" % i), "w")
        f.write(content(i))
        files.append(f)
    return files


def dup_over(d, fds):
    """Puts a file of the job's, holding head(i), over each number of fds, at offset 0."""
    for i, n in enumerate(fds):
        path = os.path.join(d, "dup%d" % i)
        with open(path, "w") as f:
            f.write(head(i))
        fd = os.open(path, os.O_RDWR)
        if fd != n:  # (n itself when the agent had closed it: the file is there already)
            os.dup2(fd, n)
            os.close(fd)
        st = os.fstat(n)
        DUPS.append((n, path, (st.st_dev, st.st_ino)))


def at_exit():
    """Registered before the agent starts, so it runs after the agent's own atexit: each
    number must still be the job's file, at offset 0 (nothing read or written through it);
    then the job writes content(i) over its head."""
    found = []
    for i, (n, path, ident) in enumerate(DUPS):
        try:
            st = os.fstat(n)
            same = (st.st_dev, st.st_ino) == ident
            offset = os.lseek(n, 0, os.SEEK_CUR)
        except OSError as e:
            same, offset = False, str(e)
        if same:
            os.write(n, content(i).encode())
        found.append({"fd": n, "path": path, "same": same, "offset": offset})
    if REPORT is not None:
        with open(REPORT, "w") as f:
            json.dump(found, f)


def watch_at_exit(report):
    global REPORT
    REPORT = report
    atexit.register(at_exit)


def inheritable_files(d, n, prefix="file"):
    """n new files under d (truncated), their descriptors inheritable by an exec'd child."""
    fds = []
    for i in range(n):
        fd = os.open(os.path.join(d, "%s%d" % (prefix, i)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.set_inheritable(fd, True)
        fds.append(fd)
    return fds


_WRITER = "import os, sys\nargs = sys.argv[1:]\nfor fd, text in zip(args[::2], args[1::2]):\n    os.write(int(fd), text.encode())\n"


def exec_writer(fds):
    """In a forked child: exec a Python that writes content(i) into each inherited fds[i]."""
    try:
        args = []
        for i, fd in enumerate(fds):
            args += [str(fd), content(i)]
        os.execv(sys.executable, [sys.executable, "-c", _WRITER] + args)
    finally:
        os._exit(127)


def fork_exec_writer(fds):
    """Forks; the child execs the writer into fds. The child's exit status."""
    pid = os.fork()
    if pid == 0:
        exec_writer(fds)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def fork_closerange_exec_writer(d, n):
    """Forks; the child closes every descriptor above 2, opens n files under d and execs the
    writer into them. The child's exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os.closerange(3, 65536)
            exec_writer(inheritable_files(d, n, "child"))
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
