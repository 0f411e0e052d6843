"""Training steps against the real torch: the agent's global optimizer step post-hook fires
for real optimizers on CPU tensors and counts their steps, and nothing initialises CUDA."""

import json

from fwsupport import Case, needs

JOB = """
    import json, sys, time, warnings
    import torch
    import strata_feed  # the running agent's (strata run imported it)

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch 2.0.1 without numpy

    end = time.time() + 10
    while time.time() < end and getattr(getattr(strata_feed, "_steps", None), "torch_hook", None) is not True:
        time.sleep(0.01)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randn(16, 2)
    for _ in range(25):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    adam = torch.optim.Adam(model.parameters())
    for _ in range(5):  # two optimizers stepping once per iteration: iterations are counted
        opt.step()
        adam.step()
    hooks = sys.modules["torch.optim.optimizer"]._global_optimizer_post_hooks
    print(json.dumps({
        "hook": strata_feed._steps.torch_hook,
        "hooks": [getattr(h, "__module__", None) for h in hooks.values()],
        "count": strata_feed._steps.STEPS.count,
        "initialized": torch.cuda._initialized or torch.cuda.is_initialized(),
        "libcuda_mapped": "libcuda.so" in open("/proc/self/maps").read(),
    }), flush=True)
"""


@needs("torch")
class TorchStepsTest(Case):
    def test_the_hook_counts_a_real_optimizers_steps(self):
        p = self.start(JOB)
        got = json.loads(self.line(p, "the steps"))
        rc, _, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(got, {
            "hook": True,
            "hooks": ["strata_feed._steps"],
            "count": 30,
            "initialized": False,
            "libcuda_mapped": False,
        })
