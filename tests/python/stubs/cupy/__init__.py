"""A stub of cupy for strata_feed's tests: the default memory pool, Device, runtime.

Importing it is like importing real CuPy: libcuda.so.1 gets loaded (CuPy links it) but
cuInit does not run, and the default pool exists and is the current allocator. Job scripts
call cupy._stub.allocate(device, nbytes) (runtime init, a context on that device, a pool
allocation) and cupy._stub.free(ptr).
"""

import _strata_stub as _s

__version__ = "13.3.0+stub"

try:
    _s.libcuda()
except OSError:
    pass

from . import cuda  # noqa: E402

_default_memory_pool = cuda.MemoryPool()
cuda.set_allocator(_default_memory_pool.malloc)


def get_default_memory_pool():
    return _default_memory_pool


from . import _stub  # noqa: E402,F401
