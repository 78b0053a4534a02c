"""The user-facing functions (`lg.exp`, `lg.matmul`, ...), also bound as Tensor methods.

Derivative rules and decompositions in the op registry call these through `ctx.F`, so
the same rule runs on eager tensors (and records under `create_graph=True`).
"""
from .creation import (arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy,
                       full, full_like, initial_seed, iota, linspace, manual_seed, ones,
                       ones_like, rand, rand_like, randint, randperm, randn, randn_like, seed,
                       tensor,
                       zeros, zeros_like, Generator, default_generator)
from .elementwise import (abs, absolute, add, angle, atan2, bitwise_and, bitwise_not,
                          bitwise_or, bitwise_xor, ceil, clamp, clip, complex, conj,
                          conj_physical, cos, div, divide, eq, imag, is_conj, polar, real,
                          resolve_conj,
                          elu, erf, erfc, exp, exp2, expm1, floor, floor_divide, fmod, ge, gelu,
                          greater, greater_equal, gt, isnan, le, leaky_relu, lerp, less, less_equal, log,
                          log10, log1p, log2, logical_and, logical_not, logical_or,
                          logical_xor, lt, maximum, minimum, mul, multiply, ne, neg, negative,
                          not_equal, pow, reciprocal, relu, remainder, round, rsqrt, sigmoid,
                          sign, silu, sin, softplus, sqrt, square, sub, subtract, tan, tanh,
                          true_divide, trunc, where, xlogy)
from .indexing import (argwhere, gather, gather_linear, getitem, index_put_linear,
                       index_select, masked_fill, nonzero, scatter, scatter_add, scatter_add_linear,
                       take_along_dim)
from .legacy import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor,
                     FloatTensor, HalfTensor, IntTensor, LongTensor, ShortTensor)
from .einsum import einsum
from .linalg import bmm, dot, matmul, mm, mv, outer
from .misc import (allclose, isclose, isfinite, isinf, numel, rsub, slice_all, softmax,
                   log_softmax, to, type_as, is_tensor, is_floating_point, is_complex,
                   equal, diag, triu, tril, trace)
from .reduction import (all, amax, amin, any, argmax, argmin, count_nonzero, logsumexp, max,
                        mean, min, norm, prod, std, std_mean, sum, sum_to_size, var, var_mean)
from .sorting import argsort, cumprod, cumsum, msort, sort, topk
from .shape import (broadcast_tensors, broadcast_to, cat, chunk, clone, concat, concatenate,
                    contiguous, expand, expand_as, flatten, flip, movedim, narrow, pad_dims,
                    permute, reshape, select, slice_dim, split, squeeze, stack, swapaxes, t,
                    transpose, unbind, unsqueeze, view, view_as_complex, view_as_real)
from . import _collective  # noqa: F401,E402  (the vjp of all_reduce: F._collective)

# Families added to complete PyTorch's surface: each module lists its functions in `__all__`
# and its Tensor methods in `METHODS` (bound by methods.bind()).
from . import (layout, matrix, pointwise, sampling, selection, spectral,  # noqa: E402
               statistics, tensor_extras)
from .layout import *  # noqa: F401,F403,E402
from .matrix import *  # noqa: F401,F403,E402
from .pointwise import *  # noqa: F401,F403,E402
from .sampling import *  # noqa: F401,F403,E402
from .selection import *  # noqa: F401,F403,E402
from .spectral import *  # noqa: F401,F403,E402
from .statistics import *  # noqa: F401,F403,E402
from .tensor_extras import *  # noqa: F401,F403,E402
from . import residual  # noqa: E402
from .residual import *  # noqa: F401,F403,E402

FAMILIES = (pointwise, matrix, statistics, spectral, selection, layout, sampling, tensor_extras,
            residual)
