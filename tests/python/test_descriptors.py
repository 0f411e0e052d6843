"""The agent's descriptors live among the job's: a job that closes or replaces them
(os.closerange as daemonising code does, os.dup2) must find its own files exactly as it
wrote them, its exit status and output its own; the feed stops and says so to the monitors
only. Every job here is a real process; its files are read back by the test."""

import json
import os

from support import ASSETS, JOBS, STRATA_RUN, STUBS, Case, agent_threads, live_sample, settled_agent_threads, wait_until

LOST = "descriptors lost: the job closed or replaced them"
SIX = 6


def content(i):
    # jobs/fdjob.py's, computed here from the same rule
    return "file %d: the job's own bytes, every one of them\n" % i * 4


class DescriptorCase(Case):
    def setUp(self):
        super().setUp()
        self.files = os.path.join(self.tmp, "files")
        os.mkdir(self.files)

    def fd_job(self, env=None):
        j = self.job(env)
        j.do("import os, sys, strata_feed; sys.path.insert(0, %r); import fdjob" % JOBS)
        return j

    def assertFiles(self, prefix, n=SIX):
        for i in range(n):
            with open(os.path.join(self.files, "%s%d" % (prefix, i)), "rb") as f:
                self.assertEqual(f.read(), content(i).encode(), "%s%d is not what the job wrote" % (prefix, i))

    def assertExitsQuietly(self, j):
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "", "the agent must say nothing on the job's stderr")


class CloseRangeTest(DescriptorCase):
    def test_files_opened_after_closerange_are_intact_at_exit(self):
        # The report: under `strata run`, a job closes every descriptor, opens six files
        # and leaves their flush to the interpreter's exit.
        env = self.env(STRATA_FEED_INTERVAL="0.05", STRATA_TEST_START="no")
        env["PYTHONPATH"] = os.pathsep.join([STRATA_RUN, ASSETS, STUBS])
        j = self.fd_job(env)
        settled_agent_threads(j.pid)  # the agent serves: its thread has waited once
        self.assertTrue(os.path.exists(self.sock_path(j.pid)))
        j.do("os.closerange(3, 65536); files = fdjob.buffered_files(%r, %d)" % (self.files, SIX))
        self.assertExitsQuietly(j)
        self.assertFiles("file")
        self.assertFalse(os.path.exists(self.sock_path(j.pid)), "the socket file outlived the job")

    def test_monitor_sees_the_end_and_the_job_exits(self):
        # While a monitor is connected and samples flow: the monitor reads whole lines and
        # then the end of the connection; the agent's threads end; the job's files are its own.
        j = self.fd_job()
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(live_sample)
        j.do("os.closerange(3, 65536); files = fdjob.buffered_files(%r, %d)" % (self.files, SIX))
        m.wait_eof()
        self.assertEqual(m.partial, b"", "the monitor was left with a line cut short")
        self.assertNotIn("bye", m.types(), "a bye reached a monitor through a descriptor the job closed")
        wait_until(lambda: agent_threads(j.pid) == [], what="the agent's threads to end")
        info = j.eval("strata_feed.info()")
        self.assertEqual((info["running"], info["error"]), (False, LOST))
        self.assertFalse(os.path.exists(self.sock_path(j.pid)))
        self.assertExitsQuietly(j)
        self.assertFiles("file")


class Dup2Test(DescriptorCase):
    def test_files_put_over_the_agents_numbers_are_never_touched(self):
        # The job's files dup2'd over every descriptor of the agent's while it serves a
        # monitor: the agent must never read, write or close them, then or at exit.
        report = os.path.join(self.tmp, "report.json")
        j = self.fd_job(self.env(STRATA_TEST_START="no"))
        j.do("fdjob.watch_at_exit(%r)" % report)  # before start: it runs after the agent's atexit
        self.assertTrue(j.eval("strata_feed.start(0.05)"))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(live_sample)
        fds = j.eval("fdjob.agent_fds()")
        self.assertGreaterEqual(len(fds), 4, fds)  # the listener, the wake-up, the connection
        j.do("fdjob.dup_over(%r, %r)" % (self.files, fds))
        m.wait_eof()  # the job's dup2 closed the agent's end of it
        self.assertEqual(m.partial, b"")
        wait_until(lambda: agent_threads(j.pid) == [], what="the agent's threads to end")
        self.assertEqual(j.eval("strata_feed.info()['error']"), LOST)
        self.assertExitsQuietly(j)
        with open(report) as f:
            found = json.load(f)
        self.assertEqual([(x["fd"], x["same"], x["offset"]) for x in found], [(fd, True, 0) for fd in fds],
                         "the agent closed, read or wrote a number that was the job's file")
        self.assertFiles("dup", len(fds))


class ForkTest(DescriptorCase):
    def test_child_that_closes_everything_and_execs_leaves_the_parents_feed(self):
        j = self.fd_job()
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(live_sample)
        self.assertEqual(j.eval("fdjob.fork_closerange_exec_writer(%r, %d)" % (self.files, SIX)), 0)
        self.assertFiles("child")
        # The parent's feed goes on: live samples on the same connection, and to a new one.
        n = len(m.snapshot())
        m.wait(live_sample, start=n)
        self.assertFalse(m.eof)
        self.assertTrue(os.path.exists(self.sock_path(j.pid)))
        self.assertEqual(self.monitor(j.pid).wait(lambda x: x["type"] == "hello")["pid"], j.pid)
        self.assertEqual(j.eval("strata_feed.info()['running']"), True)
        self.assertExitsQuietly(j)

    def test_fork_after_closerange_leaves_the_files_the_child_inherits(self):
        # The job closes everything, opens its files (taking the agent's numbers) and hands
        # them to an exec'd child: neither the fork nor the child's start may touch them.
        j = self.fd_job()
        m = self.monitor(j.pid)
        m.wait(lambda x: x["type"] == "hello")
        j.do("os.closerange(3, 65536); fds = fdjob.inheritable_files(%r, %d)" % (self.files, SIX))
        self.assertEqual(j.eval("fdjob.fork_exec_writer(fds)"), 0)
        self.assertExitsQuietly(j)
        self.assertFiles("file")
