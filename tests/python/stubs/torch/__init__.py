"""A stub of torch for strata_feed's tests: torch.cuda's memory API over a model allocator.

Shaped like the real one (names, argument order, return types). Stub-only helpers are in
torch._stub (allocate, free, fragment, oom, empty_cache). Extra environment:
  STRATA_STUB_BACKEND          native | cudaMallocAsync | pluggable (else from the alloc conf)
  STRATA_STUB_TORCH_NO_UUID=1  device properties without .uuid (torch before 2.5)
  STRATA_STUB_SNAPSHOT_DELAY   seconds memory_snapshot() takes
  STRATA_STUB_IMPORT_DELAY     seconds `import torch` spends half-imported
  STRATA_STUB_TORCH_VERSION    __version__ (default 2.15.0+stub); below 2.9 PYTORCH_ALLOC_CONF is
                               not read, below 2.1 there is no _cuda_isHistoryEnabled, below
                               2.0 no global optimizer step hooks
  STRATA_STUB_TORCH_NO_GETTER=1  no _accelerator_getAllocatorSettings (torch before it)
"""

import os as _os
import time as _time

__version__ = _os.environ.get("STRATA_STUB_TORCH_VERSION") or "2.15.0+stub"

from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import utils  # noqa: E402,F401
from . import optim  # noqa: E402,F401  (import torch imports torch.optim, as the real one does)

_delay = float(_os.environ.get("STRATA_STUB_IMPORT_DELAY") or 0)
if _delay:
    _time.sleep(_delay)  # torch sits in sys.modules, half-imported

from . import _stub  # noqa: E402,F401
