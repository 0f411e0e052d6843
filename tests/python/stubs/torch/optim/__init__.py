"""torch.optim, stubbed: the Optimizer base with torch's step hooks, and SGD."""

from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
