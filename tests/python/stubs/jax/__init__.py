"""A stub of jax for strata_feed's tests: backends, local devices, Device.memory_stats().

The GPU backend loads the (fake) libcuda and runs cuInit when it initialises, as the real
CUDA plugin does. Job scripts initialise it with jax._stub.init() (the real first op or
jax.devices() would); jax.devices() before that records a violation. Extra environment:
  STRATA_STUB_JAX_STATS  bfc (pool_bytes; default) | reserved (bytes_reserved, no pool_bytes)
                         | async (cuda_async: bytes_in_use, peaks, bytes_limit only)
                         | pjrt (unset fields read -1, through the PJRT C API)
  XLA_PYTHON_CLIENT_ALLOCATOR=platform or vmm: memory_stats() returns None (unless
                         STRATA_STUB_JAX_PLATFORM_STATS=1); a value jaxlib refuses
                         (address, ...): the GPU backend never starts, the CPU one does
  STRATA_STUB_JAX_STATS_GC=1  memory_stats() runs gc.collect() (an expensive call)
  XLA_PYTHON_CLIENT_PREALLOCATE / XLA_PYTHON_CLIENT_MEM_FRACTION: as in JAX (75% by default)
"""

__version__ = "0.4.35+stub"

from ._src import xla_bridge as _xb  # noqa: E402
from . import _stub  # noqa: E402,F401


def devices(backend=None):
    return _xb.devices(backend)


def local_devices(process_index=None, backend=None, host_id=None):
    return _xb.local_devices(process_index, backend)


def device_count(backend=None):
    return len(devices(backend))
