"""`llgrad.special`: PyTorch's `torch.special` (special functions as vectorized scalar rules)."""
