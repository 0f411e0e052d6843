"""Processes: fork, the feed dir's checks, sitecustomize (chaining, launchers), attach."""

import json
import os
import stat
import textwrap
import time

from support import ASSETS, JOBS, STRATA_RUN, STUBS, Case, Monitor, settled_agent_threads, task_count, is_sample, live_sample, wait_until


def hello(m):
    return m["type"] == "hello"


class ForkTest(Case):
    def test_child_has_no_feed_and_parent_keeps_its_socket(self):
        j = self.job()
        j.do("import torch, strata_feed, os, sys, json; a = torch._stub.allocate(0, 1 << 20)")
        before = self.monitor(j.pid)
        before.wait(is_sample)
        j.do("hub = strata_feed._agent.hub; fds = [hub.listen_fd, hub.wake_r, hub.wake_w] + list(hub.conns)")
        # The child reports what it sees, then exits through atexit like any program.
        child = (
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    bad = []\n"
            "    for fd in fds:\n"
            "        try:\n"
            "            os.fstat(fd); bad.append(fd)\n"
            "        except OSError:\n"
            "            pass\n"
            "    info = strata_feed.info()\n"
            "    ok2 = strata_feed.start(0.05)\n"
            "    sock2 = strata_feed.info()['socket']\n"
            "    with open(%r, 'w') as f:\n"
            "        json.dump({'open': bad, 'info': info, 'restart': ok2, 'socket': sock2, 'pid': os.getpid()}, f)\n"
            "    sys.exit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
        ) % os.path.join(self.tmp, "child.json")
        j.do("exec(%r)" % child)
        with open(os.path.join(self.tmp, "child.json")) as f:
            rep = json.load(f)
        self.assertEqual(rep["open"], [], "the child still holds the parent's sockets")
        self.assertFalse(rep["info"]["running"])
        self.assertTrue(rep["restart"])
        self.assertEqual(rep["socket"], self.sock_path(rep["pid"]))
        self.assertFalse(os.path.exists(rep["socket"]), "the child's own socket is removed at its exit")
        # The parent's socket survived the child's exit, and its monitors go on.
        self.assertTrue(os.path.exists(self.sock_path(j.pid)))
        n = len(before.snapshot())
        before.wait(live_sample, start=n)
        self.assertFalse(before.eof)
        after = self.monitor(j.pid)
        self.assertEqual(after.wait(hello)["pid"], j.pid)


class FeedDirTest(Case):
    def run_job(self, feed):
        j = self.job(self.env(STRATA_FEED_DIR=feed, STRATA_TEST_START="no"))
        first = j.eval("__import__('strata_feed').start(0.05)")
        second = j.eval("__import__('strata_feed').start(0.05)")
        time.sleep(0.1)
        threads = task_count(j.pid)  # the job's main thread alone
        self.assertEqual(j.finish(), 0)
        err = j.stderr()
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("strata_feed: "), err)
        self.assertEqual((first, second), (False, False))
        self.assertEqual(threads, 1)
        return lines[0]

    def test_wrong_mode(self):
        os.mkdir(self.feed, 0o755)
        os.chmod(self.feed, 0o755)
        line = self.run_job(self.feed)
        self.assertIn("chmod 700 %s" % self.feed, line)
        self.assertEqual(os.listdir(self.feed), [])

    def test_wrong_owner(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to chown")
        os.mkdir(self.feed, 0o700)
        os.chown(self.feed, 12345, 12345)
        line = self.run_job(self.feed)
        self.assertIn("owned by uid 12345", line)

    def test_symlink(self):
        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o700)
        os.symlink(real, self.feed)
        line = self.run_job(self.feed)
        self.assertIn("symbolic link", line)
        self.assertEqual(os.listdir(real), [])

    def test_not_a_directory(self):
        open(self.feed, "w").close()
        self.assertIn("not a directory", self.run_job(self.feed))

    def test_created_0700_whatever_the_umask(self):
        j = self.job(self.env(STRATA_TEST_START="no"))
        j.do("import os; os.umask(0)")
        self.assertTrue(j.eval("__import__('strata_feed').start(0.05)"))
        self.assertEqual(stat.S_IMODE(os.stat(self.feed).st_mode), 0o700)

    def test_default_dir_is_per_uid(self):
        env = self.env(STRATA_TEST_START="no")
        del env["STRATA_FEED_DIR"]
        j = self.job(env)
        self.assertEqual(j.eval("__import__('strata_feed._feeddir')._feeddir.resolve()"), "/tmp/strata-%d" % os.geteuid())


class SitecustomizeTest(Case):
    def run_env(self, extra_paths=(), **kw):
        env = self.env(STRATA_FEED_INTERVAL="0.05", **kw)
        env["PYTHONPATH"] = os.pathsep.join([STRATA_RUN, ASSETS, STUBS] + list(extra_paths))
        return env

    def test_agent_runs_and_chains_an_existing_sitecustomize(self):
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        marker = os.path.join(self.tmp, "other-ran")
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("open(%r, 'w').write('yes')\nOTHER = True\n" % marker)
        j = self.job(self.run_env([other], STRATA_TEST_START="no"))
        self.assertEqual(self.read_file(marker), "yes")
        h = self.monitor(j.pid).wait(hello)
        self.assertEqual(h["interval"], 0.05)
        self.assertTrue(j.eval("__import__('sys').modules['sitecustomize'].OTHER"))
        path = j.eval("__import__('sys').path")
        self.assertEqual(os.path.realpath(path[1]), os.path.realpath(STRATA_RUN))
        self.assertEqual(j.eval("__import__('strata_feed').info()['running']"), True)
        self.assertEqual(settled_agent_threads(j.pid).count("strata-feed"), 1)

    def test_no_other_sitecustomize(self):
        j = self.job(self.run_env(STRATA_TEST_START="no"))
        self.monitor(j.pid).wait(hello)
        self.assertIn(STRATA_RUN, j.eval("__import__('sys').path"))

    def test_a_failing_sitecustomize_is_reported_like_site_does(self):
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("raise ValueError('broken site')\n")
        j = self.job(self.run_env([other], STRATA_TEST_START="no"))
        self.monitor(j.pid).wait(hello)
        self.assertEqual(j.finish(), 0)
        self.assertIn("Error in sitecustomize; set PYTHONVERBOSE for traceback:\nValueError: broken site", j.stderr())

    def test_every_worker_of_a_launcher_gets_its_own_feed(self):
        env = self.run_env()
        j = self.job(env, script=os.path.join(JOBS, "launcher.py"), args=["3"], ready=False)
        lines = [j.line() for _ in range(3)]
        self.assertTrue(all(x.startswith("worker ") for x in lines), lines)
        pids = sorted(int(x.split()[1]) for x in lines)
        for pid in pids + [j.pid]:
            m = Monitor(self.sock_path(pid))
            self.monitors.append(m)
            self.assertEqual(m.wait(hello)["pid"], pid)
        j.p.stdin.write("go\n")
        j.p.stdin.flush()
        self.assertEqual(j.finish(), 0)
        wait_until(lambda: not os.listdir(self.feed), what="every socket removed")
        self.assertEqual(j.stderr(), "")


class AttachTest(Case):
    def attach_script(self, feed=None):
        with open(os.path.join(ASSETS, "strata_feed", "_attach.py")) as f:
            body = f.read()
        path = os.path.join(self.tmp, "attach.py")
        header = "STRATA_PACKAGE_DIR = %s\nSTRATA_STATUS_PATH = %s\nSTRATA_FEED_DIR = %s\n" % (
            json.dumps(ASSETS), json.dumps(path + ".status"), json.dumps(feed or self.feed))
        with open(path, "w") as f:
            f.write(header + body)
        return path

    def remote_exec(self, j, path):
        # What sys.remote_exec does in the target's main thread: run the file's text in a
        # fresh namespace (no __file__).
        j.do("exec(compile(open(%r).read(), '<remote>', 'exec'), {})" % path)
        with open(path + ".status") as f:
            return json.load(f)

    def test_attach_starts_the_feed(self):
        env = self.env(STRATA_TEST_START="no")
        env["PYTHONPATH"] = STUBS  # the package is not importable until the script adds it
        j = self.job(env)
        path = self.attach_script()
        st = self.remote_exec(j, path)
        self.assertEqual(st, {"ok": True, "pid": j.pid, "socket": self.sock_path(j.pid),
                              "already": False, "imported_before": False})
        self.assertEqual(self.monitor(j.pid).wait(hello)["pid"], j.pid)
        self.assertNotIn(ASSETS, j.eval("__import__('sys').path"))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")  # readers load without sys.path
        self.monitors[-1].wait(is_sample)
        st = self.remote_exec(j, path)
        self.assertTrue(st["ok"])
        self.assertTrue(st["already"])
        self.assertEqual(settled_agent_threads(j.pid).count("strata-feed"), 1)

    def test_attach_reports_failure(self):
        os.mkdir(self.feed, 0o777)
        os.chmod(self.feed, 0o777)
        j = self.job(self.env(STRATA_TEST_START="no"))
        st = self.remote_exec(j, self.attach_script())
        self.assertFalse(st["ok"])
        self.assertIn("chmod 700", st["error"])
        self.assertEqual(st["pid"], j.pid)
