"""`out=` for the `lg.*` functions that take it in PyTorch, in one place.

`with_out(fn, name)` gives `fn` a keyword-only `out` argument with PyTorch's semantics:
- the result is computed as without `out`, then written into `out` (a tensor, or a tuple of
  tensors for functions returning several) and `out` is returned;
- autograd does not record through `out=`: when grad mode is on and the result requires grad
  the call raises, as PyTorch does;
- the result's dtype must be castable to `out`'s by PyTorch's category rule (no float into an
  integer tensor, no complex into a real one, nothing but bool into bool);
- an `out` of another shape is resized (with PyTorch's warning when it held elements);
- creation functions (`zeros`, `arange`, ...) make their values in `out`'s dtype unless
  `dtype=` is given.
Where llgrad differs: the values are computed into a fresh tensor and copied, so `out=` saves
no allocation; the write is checked for overlap with the inputs as every in-place write is.
Methods (`x.add(y)`) are not wrapped: PyTorch's have no `out` either.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from ..dispatch.grad_mode import is_grad_enabled
from ..ir import dtypes as dt
from ..tensor import Tensor
from ._errors import DEVICE_RERUN

# The `lg.*` functions whose PyTorch counterpart takes `out=` (an `out` overload in ATen's
# schemas, as read by llgrad/_api_coverage.py from torch 2.13).
OUT_FUNCTIONS = frozenset(
    """
abs absolute acos acosh adaptive_avg_pool1d add addbmm addcdiv addcmul addmm addmv addr
affine_grid_generator alias_copy all amax amin aminmax angle any arange arccos arccosh
arcsin arcsinh arctan arctan2 arctanh argmax argmin argsort as_strided_copy
as_strided_scatter asin asinh atan atan2 atanh avg_pool1d baddbmm bartlett_window
batch_norm_backward_elemt batch_norm_backward_reduce batch_norm_elemt
batch_norm_gather_stats batch_norm_gather_stats_with_counts batch_norm_stats
batch_norm_update_stats bernoulli binary_cross_entropy_with_logits bincount binomial
bitwise_and bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor
blackman_window block_diag bmm bucketize cat ccol_indices_copy ceil celu chain_matmul
channel_shuffle cholesky cholesky_inverse cholesky_solve clamp clamp_max clamp_min clip
clone col_indices_copy column_stack complex concat concatenate conj_physical constant_pad_nd
conv_tbc convolution copysign cos cosh count_nonzero cross crow_indices_copy
cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution cudnn_convolution_add_relu
cudnn_convolution_relu cudnn_convolution_transpose cudnn_grid_sampler cummax cummin cumprod
cumsum deg2rad dequantize detach_copy diag diag_embed diagonal_copy diagonal_scatter diff
digamma dist div divide dot dstack embedding empty empty_like empty_permuted empty_quantized
empty_strided eq erf erfc erfinv exp exp2 expand_copy expm1 eye fill fix flip float_power
floor floor_divide fmax fmin fmod frac frexp frobenius_norm from_file full full_like gather
gcd ge geqrf ger greater greater_equal grid_sampler_2d grid_sampler_3d gt hamming_window
hann_window hardshrink hash_tensor heaviside histc histogram hspmm hstack hypot i0 igamma
igammac index_add index_copy index_fill index_put index_reduce index_select indices_copy
inner int_repr inverse isin isinf isnan isneginf isposinf kaiser_window kron kthvalue lcm
ldexp le lerp less less_equal lgamma linspace log log10 log1p log2 log_softmax logaddexp
logaddexp2 logcumsumexp logical_and logical_not logical_or logical_xor logit logspace
logsumexp lstsq lt lu_solve lu_unpack masked_fill masked_scatter masked_select matmul
matrix_power matrix_rank max maximum mean median min minimum miopen_batch_norm
miopen_convolution miopen_convolution_transpose miopen_ctc_loss miopen_depthwise_convolution
miopen_rnn mkldnn_adaptive_avg_pool2d mkldnn_convolution mkldnn_linear_backward_weights
mkldnn_max_pool2d mkldnn_max_pool3d mkldnn_rnn_layer mm mode msort mul multinomial multiply
mv mvlgamma nan_to_num nanmean nanmedian nanquantile nansum narrow_copy native_batch_norm
native_dropout native_group_norm native_layer_norm native_norm ne neg negative nextafter
nonzero nonzero_static norm normal not_equal nuclear_norm ones ones_like orgqr ormqr outer
permute_copy pixel_shuffle pixel_unshuffle poisson polar polygamma pow prod put
q_per_channel_scales q_per_channel_zero_points qr quantile quantize_per_channel
quantize_per_tensor quantize_per_tensor_dynamic quantized_batch_norm quantized_max_pool1d
quantized_max_pool2d quantized_max_pool3d rad2deg rand rand_like randint randint_like randn
randn_like randperm range reciprocal relu remainder renorm roll rot90 round row_indices_copy
row_stack rsqrt rsub scalar_tensor scatter scatter_add scatter_reduce searchsorted
segment_reduce select_copy select_scatter sgn sigmoid sign signbit sin sinc sinh slice_copy
slice_scatter slogdet softmax solve sort sparse_coo_tensor split_copy split_with_sizes_copy
sqrt square squeeze_copy sspaddmm stack std std_mean sub subtract sum svd symeig t_copy take
take_along_dim tan tanh tensordot threshold topk trace transpose_copy triangular_solve tril
tril_indices triu triu_indices true_divide trunc unbind_copy unfold_copy unique_consecutive
unsafe_split unsafe_split_with_sizes unsqueeze_copy values_copy var var_mean vdot
view_as_complex_copy view_as_real_copy view_copy vstack where xlogy zeros zeros_like
""".split()
)

# The same for the functions of other namespaces (module name -> names).
OUT_NAMESPACES: dict[str, frozenset[str]] = {
    "llgrad.special": frozenset(
        """
    airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t
    chebyshev_polynomial_u chebyshev_polynomial_v chebyshev_polynomial_w digamma entr
    erf erfc erfcx erfinv exp2 expit expm1 gammainc gammaincc gammaln
    hermite_polynomial_h hermite_polynomial_he i0 i0e i1 i1e laguerre_polynomial_l
    legendre_polynomial_p log1p log_ndtr logit logsumexp modified_bessel_i0
    modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 multigammaln ndtr ndtri
    polygamma psi round scaled_modified_bessel_k0 scaled_modified_bessel_k1
    shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
    shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w sinc
    spherical_bessel_j0 xlog1py xlogy zeta
    """.split()
    ),
    "llgrad.nn.functional": frozenset(
        """
    adaptive_avg_pool1d adaptive_max_pool2d adaptive_max_pool3d avg_pool1d avg_pool2d
    avg_pool3d channel_shuffle conv_tbc fractional_max_pool2d fractional_max_pool3d gelu
    hardshrink linear normalize pixel_shuffle pixel_unshuffle softplus softshrink
    """.split()
    ),
    "llgrad.linalg": frozenset(
        """
    cholesky cholesky_ex cond cross det eig eigh eigvals eigvalsh householder_product
    inv inv_ex ldl_factor ldl_factor_ex ldl_solve lstsq lu lu_factor lu_factor_ex
    lu_solve matmul matrix_exp matrix_norm matrix_power matrix_rank multi_dot norm pinv
    qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vecdot
    vector_norm
    """.split()
    ),
}

# Creation functions: without `dtype=`, their values are made in `out`'s dtype.
CREATION = frozenset(
    "arange empty eye full linspace logspace ones rand randint randn randperm zeros normal".split()
)


def can_cast(src: dt.DType, dst: dt.DType) -> bool:
    """PyTorch's `can_cast`: no cast to a lower category (complex > float > int > bool)."""

    def category(d: dt.DType) -> int:
        return 3 if d.is_complex else 2 if d.is_floating_point else 0 if d is dt.bool_ else 1

    return category(src) <= category(dst)


def _resize(t: Tensor, shape: tuple[int, ...], op: str) -> None:
    """Point `t` at fresh contiguous memory of `shape` (PyTorch resizes `out` so)."""
    if t.numel() != 0:
        warnings.warn(
            f"{op}: an output with one or more elements was resized since it had "
            f"shape {list(t._shape)}, which does not match the required output "
            f"shape {list(shape)}. This behavior is deprecated (as in PyTorch); "
            f"reuse an out tensor only when it has the right shape or no elements.",
            UserWarning,
            stacklevel=4,
        )
    fresh = Tensor._empty(tuple(shape), t._dtype)
    t._storage = fresh._storage
    t._offset = 0
    t._shape = fresh._shape
    t._strides = fresh._strides
    t._ptr = fresh._ptr
    t._lkey = fresh._lkey


def store(op: str, result: Any, out: Any) -> Any:
    """Write `result` (a tensor or a tuple of them) into `out`; return `out`."""
    results = (result,) if isinstance(result, Tensor) else tuple(result)
    outs = (out,) if isinstance(out, Tensor) else out
    if (
        not isinstance(outs, (tuple, list))
        or len(outs) != len(results)
        or not all(isinstance(o, Tensor) for o in outs)
    ):
        want = "a Tensor" if len(results) == 1 else f"a tuple of {len(results)} Tensors"
        raise TypeError(f"{op}(): argument 'out' must be {want}, not {type(out).__name__}")
    if is_grad_enabled() and any(r._requires_grad for r in results):
        raise RuntimeError(
            f"{op}(): functions with out=... arguments don't support automatic "
            f"differentiation, but one of the arguments requires grad."
        )
    for r, o in zip(results, outs):
        if not can_cast(r._dtype, o._dtype):
            raise RuntimeError(
                f"{op}: result type {r._dtype.name} can't be cast to the "
                f"desired output type {o._dtype.name}"
            )
        if o._shape != r._shape:
            _resize(o, r._shape, op)
        o.copy_(r)
    if isinstance(out, Tensor):
        return out
    return type(result)(*outs) if hasattr(result, "_fields") else tuple(outs)


def with_out(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`fn` with PyTorch's keyword-only `out=` (see the module docstring)."""
    creation = name in CREATION

    @functools.wraps(fn)
    def wrapper(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if out is None:
            try:
                return fn(*args, **kwargs)
            except (RuntimeError, TypeError) as e:  # eager code that cannot take CUDA
                failed = DEVICE_RERUN[0]  # tensors: served again
                if failed is not None and failed(e, args, kwargs):
                    return DEVICE_RERUN[1](fn, name, args, kwargs)
                raise
        if creation and "dtype" not in kwargs and isinstance(out, Tensor):
            kwargs["dtype"] = out._dtype
        return store(name, fn(*args, **kwargs), out)

    try:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
        params.append(
            inspect.Parameter(
                "out", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Tensor | None"
            )
        )
        wrapper.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    return wrapper


def accepts_out(fn: Callable[..., Any]) -> bool:
    """Whether `fn` already takes `out` itself."""
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True


def add_out(namespace: dict[str, Any], names: frozenset[str] = OUT_FUNCTIONS) -> None:
    """Give every function of `namespace` named in `names` its `out=` argument."""
    for name in names:
        fn = namespace.get(name)
        if callable(fn) and not isinstance(fn, type) and not accepts_out(fn):
            namespace[name] = with_out(fn, name)


def add_out_namespaces() -> None:
    """`add_out` over each module of OUT_NAMESPACES (imported by then)."""
    import sys

    for module, names in OUT_NAMESPACES.items():
        add_out(vars(sys.modules[module]), names)
