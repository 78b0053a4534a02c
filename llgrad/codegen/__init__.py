"""Code generation with llvmlite: kernels, math, the host target."""
