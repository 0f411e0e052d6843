"""jax._src.xla_bridge, stubbed."""

import threading

import _strata_stub as _s

_backends = {}
# As in JAX: backends() holds this lock for the whole of the backend init, and
# backends_are_initialized() takes it too.
_backend_lock = threading.Lock()


def backends_are_initialized():
    with _backend_lock:
        return len(_backends) != 0


def backends():
    if not _backends:
        _s.violation("jax backends() before the job initialised them")
    return _backends


def get_backend(platform=None):
    bs = backends()
    if platform is None:
        platform = "gpu" if "gpu" in bs else "cpu"
    if platform == "cuda":
        platform = "gpu"
    if platform not in bs:
        raise RuntimeError("Unknown backend %s" % platform)
    return bs[platform]


def devices(backend=None):
    return list(get_backend(backend).devices)


def local_devices(process_index=None, backend=None):
    return [d for d in devices(backend) if d.process_index == (process_index or 0)]
