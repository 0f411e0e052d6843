"""Helpers test jobs call."""

import _strata_stub as _s

_keep = []


def init():
    _s.cu_init()


def allocate(device, nbytes):
    import cupy

    with cupy.cuda.Device(device):
        p = cupy.cuda.get_allocator()(nbytes)
    _keep.append(p)
    return p


def free(ptr):
    ptr.pool._release(ptr)
    _keep.remove(ptr)
