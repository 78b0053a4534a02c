"""Buffers, the kernel cache and kernel launching."""
