"""The GPU code generator: kernels for NVIDIA GPUs (NVPTX through llvmlite) from the
schedule IR, each also buildable for the host grid emulator (`kernel.GpuKernel`)."""
