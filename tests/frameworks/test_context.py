"""The context reading against the real torch on the CPU: nothing initialises CUDA, so the
agent never loads NVML and sends no context, even with an NVML library on the path."""

import json
import os

from fwsupport import Case, needs

import support  # tests/python's (fwsupport puts it on the path)

JOB = """
    import json, sys, time, warnings
    import torch
    warnings.simplefilter("ignore")  # torch 2.0.1 without numpy warns at the first tensor
    x = torch.ones(256, 256) @ torch.ones(256, 256)  # CPU work
    time.sleep(2.0)  # the agent looks at torch many times meanwhile
    maps = open("/proc/self/maps").read()
    print(json.dumps({"libcuda": "libcuda.so" in maps, "nvml": "nvidia-ml" in maps or "nvidia_ml" in maps,
                      "initialized": torch.cuda._initialized or torch.cuda.is_initialized()}), flush=True)
    sys.stdin.readline()
"""


class ContextOnTheCpuTest(Case):
    @needs("torch")
    def test_no_cuda_init_no_nvml_loaded_no_context(self):
        nvml = support.fake_nvml_dir()
        scenario = os.path.join(self.tmp, "nvml.json")
        env = self.env(LD_LIBRARY_PATH=nvml, STRATA_FAKE_NVML_SCENARIO=scenario)
        p = self.start(JOB, env=env)
        with open(scenario, "w") as f:
            json.dump(support.nvml_scenario(support.device_specs(1), [[{"pid": p.pid, "used": 530 << 20}]]), f)
        m = self.monitor(p.pid)
        state = json.loads(self.line(p, "the state"))
        self.assertEqual(state, {"libcuda": False, "nvml": False, "initialized": False})
        self.send(p)
        rc, _, err = self.finish(p)
        self.assertEqual((rc, err), (0, ""))
        hellos = [x for x in m.snapshot() if x.get("type") == "hello"]
        self.assertTrue(hellos)
        self.assertEqual(hellos[-1]["state"], "waiting", hellos[-1])
        for h in hellos:
            self.assertFalse(any("context" in d for d in h.get("devices") or []), h)
