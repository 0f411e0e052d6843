"""Training steps: torch's global optimizer step post-hook (against the stub's Optimizer,
shaped like torch's), strata_feed.step(), the step-end readings and their limits, and no
CUDA initialisation. (The hook's cost per step is measured by benches/agent_steps.py.)"""

import time

from support import Case, is_sample, live_sample, wait_until

GAP = 0.2  # seconds between step-end readings, at least (strata_feed._steps.READ_GAP)
HOOKED = "getattr(strata_feed, '_steps', None) is not None and strata_feed._steps.torch_hook is True"


def hello_with(pred):
    return lambda m: m["type"] == "hello" and pred(m)


def step_of(s):
    steps = set(d["step"] for d in s["devices"])
    assert len(steps) == 1, s
    return steps.pop()


# What a reading costs is the machine's to say: on a loaded one the stub's reading (a dict
# built, a trace line written) can take over the limits. Tests of readings being taken, not
# of the limits, lift them in the job before its first step.
NO_READ_LIMITS = "strata_feed._steps.READ_CPU_LIMIT_NS = strata_feed._steps.READ_WALL_LIMIT_NS = 10 ** 9"


def at_end(s):
    ends = set(d["at_step_end"] for d in s["devices"])
    assert len(ends) == 1, s
    return ends.pop()


class TorchStepsTest(Case):
    def reading_job(self, **env):
        j = self.job(self.env(**env))
        j.do("import torch, time, strata_feed; torch.cuda.init(); a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        m.wait(live_sample)
        # The first sample lets the job's steps take readings (the reader knows its devices).
        wait_until(lambda: j.eval("strata_feed._steps.STEPS.reader is not None"), what="step-end readings on")
        return j, m

    def test_steps_are_counted_and_read_at_their_end(self):
        j, m = self.reading_job()
        j.do(NO_READ_LIMITS)
        first = len(m.snapshot())
        j.do("opt = torch.optim.SGD([1])")
        j.do("[(opt.step(), time.sleep(0.02)) for _ in range(40)]")
        m.wait(lambda x: is_sample(x) and not at_end(x) and step_of(x) == 40, start=first, what="step 40")
        samples = [x for x in m.snapshot()[first:] if live_sample(x)]
        ends = [x for x in samples if at_end(x)]
        self.assertGreaterEqual(len(ends), 2, [(step_of(x), at_end(x)) for x in samples])
        steps = [step_of(x) for x in ends]
        self.assertEqual(steps, sorted(set(steps)))
        self.assertTrue(all(1 <= n <= 40 for n in steps), steps)
        for a, b in zip(ends, ends[1:]):
            self.assertGreaterEqual(b["time"] - a["time"], GAP - 0.01)
            self.assertLessEqual(step_of(b) - step_of(a), 50)
        # In the order they were read: times and steps never go back.
        self.assertEqual([x["time"] for x in samples], sorted(x["time"] for x in samples))
        known = [step_of(x) for x in samples if step_of(x) is not None]
        self.assertEqual(known, sorted(known))
        self.assertEqual([x["seq"] for x in samples], sorted(x["seq"] for x in samples))
        for x in ends:
            self.assertEqual(x["devices"][0]["allocated"], 1 << 20)
            self.assertIn("read_us", x["cost"])
        # The reading was taken on the job's own thread, at the end of its step.
        self.assertIn("MainThread memory_stats_as_nested_dict 0", self.trace_lines(agent_only=False))
        self.assertNoViolation()

    def test_steps_before_cuda_init_initialise_nothing(self):
        j = self.job()
        j.do("import torch, time, strata_feed")
        wait_until(lambda: j.eval(HOOKED), what="the hook registered")
        self.assertEqual(j.eval("len(torch.optim.optimizer._global_optimizer_post_hooks)"), 1)
        j.do("opt = torch.optim.SGD([1]); [opt.step() for _ in range(20)]")
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 20)
        time.sleep(0.3)
        self.assertIs(j.eval("torch.cuda.is_initialized()"), False)
        self.assertEqual([x for x in self.trace_lines(agent_only=False) if "memory_stats" in x], [])
        self.assertNoViolation()
        # Once the job initialises CUDA, its samples carry the steps done before.
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        s = self.monitor(j.pid).wait(lambda x: live_sample(x) and step_of(x) is not None)
        self.assertEqual(step_of(s), 20)
        self.assertIs(at_end(s), False)
        self.assertNoViolation()

    def test_no_optimizer_step_no_step(self):
        j, m = self.reading_job()
        s = m.wait(live_sample)
        self.assertIsNone(step_of(s))
        self.assertIs(at_end(s), False)

    def test_several_optimizers_count_iterations(self):
        j, m = self.reading_job()
        j.do("g = torch.optim.SGD([1]); d = torch.optim.SGD([2])")
        j.do("[(d.step(), g.step()) for _ in range(10)]")
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 10)
        j.do("del d; [g.step() for _ in range(5)]")  # the one counted is gone: the next one counts
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 15)

    def test_a_job_with_global_hooks_of_its_own_gets_none_added(self):
        # Adding one while a step of the job's runs them would fail that step.
        j = self.job()
        j.do("import torch, strata_feed; torch.optim.optimizer.register_optimizer_step_post_hook(lambda o, a, k: None)")
        j.do("a = torch._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        h = m.wait(hello_with(lambda h: "hooks of its own" in (h["note"] or "")))
        self.assertIn("steps not counted: the job has global optimizer step hooks of its own", h["note"])
        j.do("opt = torch.optim.SGD([1]); [opt.step() for _ in range(5)]")
        self.assertEqual(j.eval("len(torch.optim.optimizer._global_optimizer_post_hooks)"), 1)
        self.assertIsNone(step_of(m.wait(live_sample, start=len(m.snapshot()))))

    def test_a_torch_without_global_step_hooks(self):
        j = self.job(self.env(STRATA_STUB_TORCH_VERSION="1.13.1"))
        j.do("import torch; a = torch._stub.allocate(0, 1 << 20)")
        h = self.monitor(j.pid).wait(hello_with(lambda h: "step hook" in (h["note"] or "")))
        self.assertIn("steps not counted: torch 1.13.1 has no global optimizer step hook", h["note"])

    def test_a_failing_reading_never_fails_the_step(self):
        j, m = self.reading_job()
        j.do("torch.cuda.memory_stats_as_nested_dict = lambda i: 1 / 0")
        j.do("opt = torch.optim.SGD([1]); [(opt.step(), time.sleep(0.01)) for _ in range(30)]")
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 30)
        h = m.wait(hello_with(lambda h: "step-end readings stopped" in (h["note"] or "")))
        self.assertIn("step-end readings stopped: ZeroDivisionError", h["note"])

    def test_a_slow_reading_turns_step_end_readings_off(self):
        j, m = self.reading_job()
        # Slow on the clock. What a reading costs in CPU is the machine's to say (on a loaded
        # virtual machine even a sleep can cost over 1 ms of the thread's CPU), so the CPU
        # limit is lifted here and each reading burns 1.5 ms on top: only the run of slow
        # ones can turn readings off.
        j.do("strata_feed._steps.READ_CPU_LIMIT_NS = 10 ** 9")  # not the wall one
        j.do("kept = torch.cuda.memory_stats_as_nested_dict(0)")
        slow = "def slow(i):\n    end = time.thread_time() + 0.0015\n    while time.thread_time() < end: pass\n    time.sleep(0.002)\n    return kept"
        j.do("exec(%r)" % slow)
        j.do("torch.cuda.memory_stats_as_nested_dict = slow")
        j.do("opt = torch.optim.SGD([1]); [(opt.step(), time.sleep(0.05)) for _ in range(20)]")
        h = m.wait(hello_with(lambda h: "step-end readings stopped" in (h["note"] or "")))
        self.assertRegex(h["note"], r"3 in a row took over 1 ms, the last \d+\.\d ms")
        first = len(m.snapshot())
        j.do("[(opt.step(), time.sleep(0.05)) for _ in range(12)]")
        m.wait(lambda x: is_sample(x) and step_of(x) == 32, start=first, what="step 32")
        self.assertFalse([x for x in m.snapshot()[first:] if is_sample(x) and at_end(x)])

    def test_a_reading_that_costs_over_a_millisecond_turns_them_off_at_once(self):
        j, m = self.reading_job()
        j.do("real = torch.cuda.memory_stats_as_nested_dict")
        busy = "def busy(i):\n    end = time.thread_time() + 0.002\n    while time.thread_time() < end: pass\n    return real(i)"
        j.do("exec(%r)" % busy)  # 2 ms of the job thread's CPU per reading
        j.do("torch.cuda.memory_stats_as_nested_dict = busy")
        j.do("opt = torch.optim.SGD([1]); [(opt.step(), time.sleep(0.05)) for _ in range(3)]")
        h = m.wait(hello_with(lambda h: "step-end readings stopped" in (h["note"] or "")))
        self.assertRegex(h["note"], r"one cost \d+\.\d ms of CPU \(at most 1 ms\)")

    def test_a_forked_child_starts_from_no_steps(self):
        j = self.job()
        j.do("import os, torch, strata_feed; strata_feed.step(); strata_feed.step()")
        j.do("pid = os.fork(); pid or os._exit(0 if strata_feed._steps.STEPS.count is None else 3)")
        self.assertEqual(j.eval("os.WEXITSTATUS(os.waitpid(pid, 0)[1])"), 0)
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 2)


class JobStepsTest(Case):
    def test_a_step_while_the_agent_is_still_importing_the_step_module_counts(self):
        # The agent's thread imports strata_feed._steps while the job's first steps run: a step
        # that finds the module half made waits for it rather than being lost.
        j = self.job(self.env(STRATA_TEST_START="no"))
        j.do("import sys, threading, types, strata_feed, strata_feed._threads as real")
        j.do("gate = threading.Event(); held = types.ModuleType(real.__name__)")
        j.do("held.__getattr__ = lambda name: (gate.wait(), getattr(real, name))[1]")
        j.do("sys.modules[real.__name__] = held")
        j.do("t = threading.Thread(target=__import__, args=('strata_feed._steps',)); t.start()")
        wait_until(lambda: j.eval("'strata_feed._steps' in sys.modules"), what="the import under way")
        j.do("threading.Timer(0.3, gate.set).start(); strata_feed.step(); strata_feed.step(); t.join()")
        j.do("sys.modules[real.__name__] = real")
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 2)

    def test_strata_feed_step_for_a_loop_of_its_own(self):
        j = self.job(self.env(libcuda=True))
        j.do("import jax, time, strata_feed; jax._stub.init(); a = jax._stub.allocate(0, 1 << 20)")
        m = self.monitor(j.pid)
        s = m.wait(live_sample)
        self.assertIsNone(step_of(s))  # no steps given: none invented
        wait_until(lambda: j.eval("strata_feed._steps.STEPS.reader is not None"), what="step-end readings on")
        j.do(NO_READ_LIMITS)
        first = len(m.snapshot())
        j.do("[(strata_feed.step(), time.sleep(0.02)) for _ in range(30)]")
        m.wait(lambda x: is_sample(x) and not at_end(x) and step_of(x) == 30, start=first, what="step 30")
        ends = [x for x in m.snapshot()[first:] if live_sample(x) and at_end(x)]
        self.assertGreaterEqual(len(ends), 2)
        self.assertTrue(all(1 <= step_of(x) <= 30 for x in ends))
        # Resuming from a checkpoint: the count the job gives.
        j.do("time.sleep(0.25); strata_feed.step(1000)")
        s = m.wait(lambda x: is_sample(x) and step_of(x) == 1000, start=first, what="step 1000")
        self.assertTrue(at_end(s) or s["time"] > ends[-1]["time"])
        # A bad count is counted as one step, and said once on stderr.
        self.assertIsNone(j.eval("strata_feed.step(-1)"))
        self.assertIsNone(j.eval("strata_feed.step('x')"))
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 1002)
        self.assertEqual(j.finish(), 0)
        err = j.stderr()
        self.assertEqual(err.count("strata_feed: "), 1, err)
        self.assertIn("strata_feed.step(n): n must be an int >= 0, not -1", err)
        self.assertNoViolation()

    def test_strata_feed_step_wins_over_the_torch_hook(self):
        j = self.job()
        j.do("import torch, strata_feed")
        wait_until(lambda: j.eval(HOOKED), what="the hook registered")
        j.do("opt = torch.optim.SGD([1]); [opt.step() for _ in range(3)]")
        # The first optimizer step below still counts; from the job's first step() on,
        # only the job's own count does.
        j.do("[(opt.step(), strata_feed.step()) for _ in range(4)]")
        self.assertEqual(j.eval("strata_feed._steps.STEPS.count"), 3 + 1 + 4)

    def test_step_without_a_running_feed_is_harmless(self):
        j = self.job(self.env(STRATA_TEST_START="no"))
        self.assertIsNone(j.eval("__import__('strata_feed').step()"))
        self.assertEqual(j.eval("__import__('strata_feed')._steps.STEPS.count"), 1)
        self.assertEqual(j.finish(), 0)
        self.assertEqual(j.stderr(), "")
