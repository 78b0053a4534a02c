"""`llgrad.fft`: PyTorch's `torch.fft` (discrete Fourier transforms with gradients)."""
