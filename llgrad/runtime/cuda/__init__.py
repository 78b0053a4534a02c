"""llgrad's CUDA runtime: the driver backend, its emulator, the caching allocator and cuBLAS.

`driver.get()` returns the process's `Backend`: the real one (NVIDIA's `cuda-bindings`, the
`llgrad[cuda]` extra) on a machine with a GPU, or the host-memory grid emulator when
`LLGRAD_CUDA_EMULATE=1`. Importing this package imports nothing heavy: `cuda.bindings` and
cuBLAS load on first use.
"""
