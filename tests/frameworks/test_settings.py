"""torch's allocator settings as the real torch reads them: which variable wins, a variable
set after import, and a change at run time (a new hello)."""

import os
import subprocess

from fwsupport import ASSETS, PY, VENV, Case, needs

JOB = """
    import os, sys
    import torch
    print("imported", flush=True)
    for line in sys.stdin:
        exec(line)
        print("ok", flush=True)
"""


def settings_of(h):
    s = h.get("settings") or {}
    return s.get("alloc_conf"), s.get("expandable_segments")


@needs("torch")
class TorchSettingsTest(Case):
    def job(self, **env):
        p = self.start(JOB, env=self.env(**env))
        self.assertEqual(self.line(p), "imported")
        return p, self.monitor(p.pid)

    def test_cuda_variable_wins_over_the_generic_one(self):
        p, m = self.job(PYTORCH_ALLOC_CONF="expandable_segments:True", PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64")
        h = self.hello(m, lambda h: settings_of(h)[0] is not None)
        self.assertEqual(settings_of(h), ("max_split_size_mb:64", False))

    def test_generic_variable_alone(self):
        p, m = self.job(PYTORCH_ALLOC_CONF="expandable_segments:True")
        if VENV == "new":
            h = self.hello(m, lambda h: settings_of(h)[0] is not None)
            self.assertEqual(settings_of(h), ("expandable_segments:True", True))
        else:
            # torch 2.0 does not read PYTORCH_ALLOC_CONF at all.
            h = self.hello(m, lambda h: "alloc_conf_source" in (h.get("settings") or {}))
            self.assertEqual(settings_of(h), (None, False))
            self.assertIsNone(h["settings"]["alloc_conf_source"])

    def test_a_variable_set_after_import_sends_a_new_hello(self):
        # torch reads its settings at the first CUDA use: a variable set after import torch
        # is honoured, and the agent must not make torch read them earlier.
        p, m = self.job()
        self.hello(m, lambda h: h.get("note") == "waiting for torch to initialise CUDA")
        self.send(p, "os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'")
        self.line(p)
        h = self.hello(m, lambda h: settings_of(h)[1] is True)
        self.assertEqual(settings_of(h), ("expandable_segments:True", True))
        if VENV == "new":
            self.send(p, "print(torch._C._accelerator_getAllocatorSettings())")
            self.assertEqual(self.line(p), "expandable_segments:True")

    def test_fallback_precedence_is_torchs(self):
        # Where torch has the getter, the agent's fallback (for torch without it) must agree
        # with it on every combination of the two variables.
        if VENV != "new":
            self.skipTest("needs torch with _accelerator_getAllocatorSettings")
        probe = (
            "import sys; sys.path.insert(0, %r)\n"
            "import torch\n"
            "from strata_feed._torch import alloc_conf_from_env\n"
            "got = torch._C._accelerator_getAllocatorSettings() or None\n"
            "print(repr((got, alloc_conf_from_env()[1])))\n" % ASSETS
        )
        a, b = "max_split_size_mb:64", "garbage_collection_threshold:0.5"
        for env in ({"PYTORCH_ALLOC_CONF": a}, {"PYTORCH_CUDA_ALLOC_CONF": b},
                    {"PYTORCH_ALLOC_CONF": a, "PYTORCH_CUDA_ALLOC_CONF": b}, {}):
            e = self.env(agent=False, **env)
            out = subprocess.run([PY, "-c", probe], env=e, capture_output=True, text=True, check=True).stdout
            torch_says, agent_says = eval(out)
            self.assertEqual(torch_says, agent_says, env)
