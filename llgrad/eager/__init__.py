"""Eager execution: one op at a time on generated kernels."""
