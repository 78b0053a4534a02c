"""`llgrad.linalg`: PyTorch's `torch.linalg` (LAPACK through SciPy, with derivative rules).

Two kinds of function:
- LAPACK-backed (`det slogdet inv(_ex) solve(_ex) cholesky(_ex) solve_triangular qr eigh
  eigvalsh eig eigvals svd svdvals pinv lstsq matrix_exp lu lu_factor(_ex) ldl_factor(_ex)
  ldl_solve`): the values come from LAPACK on the host, through SciPy's LAPACK called
  through its function pointers (`llgrad.runtime.lapack`: potrf, getrf, getrs, gesv,
  geqrf, sytrf, syevd, gesdd, gelsy/gelsd/gelss/gels, ... one foreign call per matrix of
  the batch, no Python wrapper in between; a call that records nothing writes the results
  straight into its outputs) and NumPy's batched loops (`numpy.linalg`: det, slogdet, qr,
  eig), float32/float64/complex64/
  complex128 as torch; integer and half inputs
  are refused as torch refuses them. Each call records ONE autograd node named as
  torch's (`LinalgDetBackward0`), whose derivative rule (torch's published rules: det,
  slogdet, inv, solve, cholesky, solve_triangular, qr, eigh, eig, svd with its gauge
  check for complex inputs, pinv, lstsq through pinv, matrix_exp by the block-matrix
  exponential, lu and lu_factor) is written with llgrad functions, so double backward
  works; forward mode uses the op's jvp or the transposed vjp. Inside `lg.compile` these
  ops are a **graph break**: the signature that reaches one runs eagerly (recorded in
  `cf.graph_breaks` with the user's line; `fullgraph=True` raises). Under `vmap` they
  run once on the whole batch.
- Composed from llgrad's differentiable ops (`vector_norm`, `matrix_norm` for 'fro' and
  +-1/inf, `norm`, `matrix_power` with n >= 0, `multi_dot`, `cross`, `vecdot`,
  `vander`, `diagonal`, `householder_product`, `lu_solve` (triangular solves),
  `matmul`): these compile into graphs (except the LAPACK-backed parts they call).

Errors follow torch: non-square input, integer dtypes, a singular matrix for `inv` and
`solve`, a matrix that is not positive-definite for `cholesky` raise (`LinAlgError`, a
RuntimeError, for value-dependent failures); the `_ex` variants return LAPACK's `info`.

Where llgrad differs: `linalg.diagonal` returns a copy (torch: a view); singular vectors
and eigenvectors have LAPACK's signs (phases), as torch's do but not necessarily the same
ones on every LAPACK build. As in torch, `svd`'s gradient with `full_matrices=True` ignores
the gradients of U's columns and Vh's rows past min(m, n) (any orthonormal basis of the
complement).
"""

from ..functions.linalg import matmul
from ._composed import (
    cond,
    cross,
    diagonal,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    norm,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
    vector_norm,
)
from ._decomp import (
    cholesky,
    cholesky_ex,
    det,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    householder_product,
    inv,
    inv_ex,
    ldl_factor,
    ldl_factor_ex,
    ldl_solve,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matrix_exp,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
)
from ._host import LinAlgError
from ..functions._errors import serve_on_devices

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]


def _served_on_devices() -> None:
    """Every public function here also serves CUDA tensors where its eager code cannot."""
    serve_on_devices(globals())


_served_on_devices()
