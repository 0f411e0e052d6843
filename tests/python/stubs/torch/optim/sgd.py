"""torch.optim.SGD, stubbed: a step that does `work` loop iterations (a stub-only argument)
and never touches CUDA."""

from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, work=0):
        super(SGD, self).__init__(params, {"lr": lr})
        self.work = work
        self.steps = 0

    def step(self, closure=None):
        x = 0
        for i in range(self.work):
            x += i
        self.steps += 1
        return None
