"""The schedule stage: kernel-level IR between the graph passes and code generation.

`layout` (index spaces, strides, the layouts kernels read through), `elementwise`
(scalar DAGs and elementwise kernel specs), `reduce`, `row`, `index`, `matmul` (the other
kernel specs: what each kernel loops over, loads, stores and accumulates) and `program`
(launches over buffers: the whole schedule of a compiled graph, printable, with its
memory traffic). The fusion and lowering passes build it; codegen lowers it to LLVM IR.
It imports neither.
"""
