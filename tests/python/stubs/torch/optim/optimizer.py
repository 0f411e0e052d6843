"""torch.optim.optimizer, stubbed as torch 2.x has it: global step pre- and post-hooks in
OrderedDicts, called around every step of every optimizer by the wrapper torch patches onto
each Optimizer subclass's step. Iterating the dicts is real iteration: a hook added while a
step runs them fails that step, as in torch.

STRATA_STUB_TORCH_VERSION below 2.0: no register_optimizer_step_post_hook (torch 1.x).
"""

import functools
import os
from collections import OrderedDict
from itertools import chain

import _strata_stub as _s

from ..utils import hooks

_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    handle = hooks.RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    if _s.on_agent_thread():
        _s.trace("register_optimizer_step_post_hook")
    handle = hooks.RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


class Optimizer(object):
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.param_groups = [{"params": list(params)}]
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._patch_step_function()

    def _patch_step_function(self):
        hooked = getattr(self.__class__.step, "hooked", None)
        if not hooked:
            self.__class__.step = self.profile_hook_step(self.__class__.step)
            self.__class__.step.hooked = True

    @staticmethod
    def profile_hook_step(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            self, *_ = args
            for pre_hook in chain(_global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
                result = pre_hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
            out = func(*args, **kwargs)
            for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()):
                post_hook(self, args, kwargs)
            return out

        return wrapper

    def register_step_post_hook(self, hook):
        handle = hooks.RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def zero_grad(self, set_to_none=True):
        pass

    def step(self, closure=None):
        raise NotImplementedError


def _trim():
    v = os.environ.get("STRATA_STUB_TORCH_VERSION") or "2.15.0"
    if tuple(int(x) for x in v.split("+")[0].split(".")[:2]) < (2, 0):
        g = globals()
        del g["register_optimizer_step_post_hook"], g["register_optimizer_step_pre_hook"]


_trim()
