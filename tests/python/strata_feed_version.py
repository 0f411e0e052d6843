"""The agent's version, read from its package without importing it (tests compare it)."""

import os

_INIT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "assets", "python", "strata_feed", "__init__.py")
with open(_INIT) as _f:
    VERSION = [line.split("=", 1)[1].strip().strip('"') for line in _f if line.startswith("__version__")][0]
