"""torch.cuda.memory, stubbed: the calls that initialise CUDA."""

import _strata_stub as _s


def _record_memory_history(enabled="all", *args, **kwargs):
    from . import is_initialized
    from .. import _stub

    if not is_initialized():
        _s.violation("torch.cuda.memory._record_memory_history before CUDA init")
    _stub.recording = enabled not in (None, False)


def _snapshot(device=None):
    from . import memory_snapshot

    return {"segments": memory_snapshot(), "device_traces": []}
