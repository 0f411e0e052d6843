"""torch.cuda.memory, stubbed: the allocator history and snapshots, with the signatures of
the torch the stub plays (STRATA_STUB_TORCH_VERSION): 2.15's, 2.1's where it differs, and
2.0's (the boolean form only, no _cuda_isHistoryEnabled in torch._C). What they do is
torch's (c10/cuda/CUDACachingAllocator.cpp, torch/csrc/cuda/memory_snapshot.cpp):
history is per allocator, on for every device at once; turning it off empties the ring;
"state" keeps a ring of one entry; the frames come with trace entries only when context is
"alloc" or "all".
"""

import os
import sys
import time
from inspect import signature

import _strata_stub as _s

from .. import _stub


def _version():
    return _stub.version()


def _enter(name):
    # torch initialises CUDA here (lazyInitDevice): the agent must never be the one to.
    from . import _lazy_init, is_initialized

    if not is_initialized():
        if _s.on_agent_thread():
            _s.violation("torch.cuda.memory.%s before CUDA init" % name)
        _lazy_init()
    if _stub.backend() == "cudaMallocAsync":
        raise RuntimeError("cudaMallocAsync does not yet support recordHistory. If you need it, please file an issue describing your use case.")
    if _stub.backend() == "pluggable":
        raise RuntimeError("CUDAPluggableAllocator does not yet support recordHistory. If you need it, please file an issue describing your use case.")


def _check(option, valid, error):
    if option not in valid:
        raise RuntimeError(error)


def _apply(enabled, context, stacks, max_entries, clear_history=False, skip_actions=None):
    """torch._C._cuda_record_memory_history."""
    if enabled is not None:
        _check(enabled, ("state", "all"), "expected state to be 'state', 'all', or None")
    if context is not None:
        _check(context, ("state", "alloc", "all"), "expected context to be 'state', 'alloc', 'all', or None")
    _check(stacks, ("python", "all"), "expected stacks to be 'python', or 'all'")
    _enter("_record_memory_history")
    _s.trace("_record_memory_history %s" % (enabled,))
    _stub.HISTORY.calls.append((enabled, context, stacks, max_entries))
    max_entries = max_entries if enabled == "all" else 1
    _stub.set_history(enabled is not None, _stub._CONTEXT[context] if enabled else 0, max_entries,
                      clear_history, skip_actions)


def _record_memory_history_legacy(
    enabled,
    record_context=True,
    trace_alloc_max_entries=1,
    trace_alloc_record_context=False,
    device=None,
    record_context_cpp=False,
    clear_history=False,
    compile_context=False,
    global_record_annotations=False,
    skip_actions=None,
    record_pinned_host_memory=False,
    record_cuda=True,
):
    _enter("_record_memory_history")
    _s.trace("_record_memory_history %s" % (enabled,))
    _stub.HISTORY.calls.append((enabled, record_context, None, trace_alloc_max_entries))
    when = _stub.ALLOC if trace_alloc_record_context else (_stub.STATE if record_context else _stub.NEVER)
    _stub.set_history(bool(enabled), when, trace_alloc_max_entries, clear_history, skip_actions)


def _record_memory_history_impl(
    enabled="all",
    context="all",
    stacks="all",
    max_entries=sys.maxsize,
    device=None,
    clear_history=False,
    compile_context=False,
    global_record_annotations=False,
    skip_actions=None,
    record_pinned_host_memory=False,
    record_cuda=True,
):
    _apply(enabled, context, stacks, max_entries, clear_history, skip_actions)


def _record_memory_history_impl_2_1(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    _apply(enabled, context, stacks, max_entries)


def _snapshot_dict():
    if _stub.fail_snapshot:
        raise RuntimeError(_stub.fail_snapshot)
    delay = float(os.environ.get("STRATA_STUB_SNAPSHOT_DELAY") or 0)
    if delay:
        time.sleep(delay)
    _s.trace("_snapshot")
    segments, traces = _stub.snapshot(True)
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": _stub.last_settings(),
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": _stub.expandable(),
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {},
        },
    }


if _version() >= (2, 15):

    def _record_memory_history(enabled="all", *args, **kwargs):
        if isinstance(enabled, bool):
            return _record_memory_history_legacy(enabled, *args, **kwargs)
        return _record_memory_history_impl(enabled, *args, **kwargs)

    _record_memory_history.__signature__ = signature(_record_memory_history_impl)

    def _snapshot(device=None, augment_with_fx_traces=False):
        from . import is_initialized

        if not is_initialized() and _s.on_agent_thread():
            _s.violation("torch.cuda.memory._snapshot before CUDA init")
        return _snapshot_dict()

elif _version() >= (2, 1):

    def _record_memory_history(enabled="all", *args, **kwargs):
        if isinstance(enabled, bool):
            return _record_memory_history_legacy(enabled, *args, **kwargs)
        return _record_memory_history_impl_2_1(enabled, *args, **kwargs)

    _record_memory_history.__signature__ = signature(_record_memory_history_impl_2_1)

    def _snapshot(device=None):
        return _snapshot_dict()

else:

    def _record_memory_history(enabled, record_context=True, trace_alloc_max_entries=1,
                               trace_alloc_record_context=False, device=None, record_context_cpp=False):
        return _record_memory_history_legacy(enabled, record_context, trace_alloc_max_entries,
                                             trace_alloc_record_context, device, record_context_cpp)

    def _snapshot(device=None):
        return _snapshot_dict()
