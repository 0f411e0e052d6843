"""torch.utils, stubbed: only hooks."""
