"""`llgrad.linalg`: PyTorch's `torch.linalg` (LAPACK through SciPy, with derivative rules)."""
