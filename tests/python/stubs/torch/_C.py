"""torch._C: the private bindings the agent may use."""

import _strata_stub as _s


def _state():
    from . import _stub

    return _stub


def _cuda_getDeviceCount():
    return len(_state().DEVICES)


def _cuda_hasPrimaryContext(device):
    st = _state()
    if not st.initialised:
        _s.violation("torch._C._cuda_hasPrimaryContext before CUDA init")
    if not isinstance(device, int):
        raise TypeError("device must be an int")
    _s.trace("hasPrimaryContext %d" % device)
    return st.DEVICES[device].context


def _cuda_attach_out_of_memory_observer(observer):
    st = _state()
    if not st.initialised:
        _s.violation("torch._C._cuda_attach_out_of_memory_observer before CUDA init")
    if st.backend() != "native":
        raise RuntimeError("cudaMallocAsync does not yet support attachOutOfMemoryObserver")
    _s.trace("attach_out_of_memory_observer")
    st.observers.append(observer)


def _cuda_isInBadFork():
    return False


def _cuda_getAllocatorBackend():
    return _state().backend()


def _accelerator_getAllocatorSettings():
    return _state().last_settings()


def _accelerator_setAllocatorSettings(env):
    _state()._set_settings.append(str(env))


def _cuda_isHistoryEnabled():
    # torch reads the calling thread's current device (cudaGetDevice): before the job's
    # CUDA init that would initialise the runtime (on a machine without a driver it raises).
    st = _state()
    if not st.initialised and _s.on_agent_thread():
        _s.violation("torch._C._cuda_isHistoryEnabled before CUDA init")
    return st.recording


def _trim():
    # Present or not as in the torch the stub plays.
    import os

    g = globals()
    if os.environ.get("STRATA_STUB_TORCH_NO_GETTER") == "1":
        del g["_accelerator_getAllocatorSettings"], g["_accelerator_setAllocatorSettings"]
    v = os.environ.get("STRATA_STUB_TORCH_VERSION") or "2.15.0"
    if tuple(int(x) for x in v.split("+")[0].split(".")[:2]) < (2, 1):
        del g["_cuda_isHistoryEnabled"]


_trim()
