"""`grad`, `value_and_grad`, `vjp`, `jvp` with JAX's conventions, on llgrad's autograd.

Reverse mode runs `f` on fresh differentiable stand-ins of the inputs and pulls
cotangents back with `llgrad.autograd.grad`; forward mode makes dual tensors with
`llgrad.autograd.forward_ad`. The user's tensors are never marked or accumulated into:
a stand-in is `x.detach().requires_grad_()`, or a recorded alias of `x` when `x` already
carries derivative information (it requires grad, or it is dual) so that an enclosing
transform or tape still sees through the call; this is what makes `grad(grad(f))`,
`jacrev(jacfwd(f))` and `jacfwd(jacrev(f))` compose. A jvp inside another forward-mode
transform runs by reverse mode (`_nested_jvp`), so `jacfwd(jacfwd(f))` composes too.

Inside `vmap`, differentiation happens on the plain values with every vmap batch made
explicit (`batching.lift`): the stand-ins carry one slice per batch element, so a
batched output's backward pass, seeded with the (batched) cotangent, yields per-example
gradients. Inputs that are not batched but meet batched values (weights in per-example
gradients) are broadcast along those batches first. Results are wrapped back to the
logical level.

Backward passes record themselves (`create_graph`) only when something outside this call
can see the result's history (another tape, an enclosing grad): otherwise the returned
values and gradients carry no autograd state, as JAX's arrays do.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from .. import functions as F
from ..tape import forward as forward_ad
from ..autograd.api import grad as autograd_grad
from ..tape.node import AccumulateGrad
from ..dispatch.grad_mode import enable_grad
from ..pytree import TreeDef, flatten, unflatten
from ..tensor import Tensor
from .batching import bottom, levels, lift, union_levels, unlift

__all__ = ["grad", "value_and_grad", "vjp", "jvp"]


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _is_diff_dtype(t: Tensor) -> bool:
    return t._dtype.is_floating_point or t._dtype.is_complex


def _check_inputs(fn_name: str, xs: Sequence[Any]) -> None:
    for x in xs:
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{fn_name}: argument of type {type(x).__name__} is not a valid "
                f"input to differentiate; pass tensors (or pytrees of tensors)"
            )
        if not _is_diff_dtype(x):
            raise TypeError(
                f"{fn_name} requires real- or complex-valued inputs (a floating "
                f"point dtype), but got {x._dtype.name}. If you want to use "
                f"integer or bool inputs, close over them instead of "
                f"differentiating with respect to them."
            )


def _fresh(p: Tensor) -> Tensor:
    """A differentiable stand-in for the plain tensor `p`."""
    if p._requires_grad or forward_ad.tangent_of(p) is not None:
        with enable_grad():
            alias = F.reshape(p, tuple(p._shape), name="AliasBackward0")
        return alias if alias._requires_grad else alias.requires_grad_()
    return p.detach().requires_grad_()


def _foreign_history(roots: Sequence[Tensor], ours: Sequence[Tensor]) -> bool:
    """Whether the graph of `roots` reaches a tensor that requires grad other than `ours`
    (then results must keep their history for whoever differentiates that tensor)."""
    mine = {id(t) for t in ours}
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    for r in roots:
        if r.grad_fn is None and r._requires_grad and id(r) not in mine:
            return True
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            if id(node.variable) not in mine:
                return True
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return False


def _plain(t: Any) -> Any:
    """`t` without autograd history (its tangent, if any, kept), wrappers rebuilt."""
    if not isinstance(t, Tensor):
        return t
    lv = levels(t)
    b = bottom(t)
    if not b._requires_grad:
        return t
    d = b.detach()
    tangent = forward_ad.tangent_of(b)
    if tangent is not None:
        forward_ad.set_tangent(d, tangent)
    return unlift(d, lv)


def _split_aux(result: Any, has_aux: bool, fn_name: str) -> tuple[Any, Any]:
    if not has_aux:
        return result, None
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError(
            f"{fn_name} with has_aux=True requires the function to return a pair "
            f"(tuple/list of length 2) of (output, auxiliary data), got "
            f"{type(result).__name__}"
        )
    return result[0], result[1]


def _argnums(argnums: Any, nargs: int, fn_name: str) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else argnums
    if (
        not isinstance(nums, (tuple, list))
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in nums)
        or not nums
    ):
        raise TypeError(
            f"{fn_name}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}"
        )
    norm = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise ValueError(
                f"{fn_name}: differentiating with respect to argnums={argnums!r} "
                f"requires at least {(i if i >= 0 else -i - 1) + 1} positional "
                f"arguments to be passed by the caller, but got only {nargs} "
                f"positional arguments."
            )
        norm.append(i % nargs)
    if len(set(norm)) != len(norm):
        raise ValueError(f"{fn_name}: argnums {argnums!r} repeats an argument")
    return tuple(norm), single


def _partial(
    fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], nums: tuple[int, ...]
) -> Callable[..., Any]:
    """`fun` as a function of the arguments at `nums` only (the others fixed)."""

    def g(*diff: Any) -> Any:
        full = list(args)
        for i, v in zip(nums, diff):
            full[i] = v
        return fun(*full, **kwargs)

    return g


# --------------------------------------------------------------------------------------
# reverse mode
# --------------------------------------------------------------------------------------


class Linearized:
    """`f` evaluated on differentiable stand-ins; `pullback` runs its backward pass."""

    def __init__(
        self,
        fn_name: str,
        f: Callable[..., Any],
        primals: tuple[Any, ...],
        context: Sequence[Any],
        has_aux: bool,
    ):
        self.fn_name = fn_name
        leaves, self.in_tree = flatten(primals)
        _check_inputs(fn_name, leaves)
        scope = union_levels(
            leaves + [x for x in flatten(tuple(context))[0] if isinstance(x, Tensor)]
        )
        for attempt in range(2):
            self.fresh = [_fresh(lift(x, scope)) for x in leaves]
            with enable_grad():
                result = f(*unflatten(self.in_tree, [unlift(p, scope) for p in self.fresh]))
            out, self.aux = _split_aux(result, has_aux, fn_name)
            self.out_leaves, self.out_tree = flatten(out)
            for o in self.out_leaves:
                if not isinstance(o, Tensor):
                    raise TypeError(
                        f"{fn_name}: the function must return tensors (or pytrees "
                        f"of tensors), got {type(o).__name__}"
                    )
            extra = [i for i in union_levels(self.out_leaves) if i not in scope]
            if not extra:
                break
            if attempt:
                raise RuntimeError(
                    f"{fn_name}: the function's output changed its vmap "
                    f"batching between two calls on the same inputs"
                )
            # the output is batched by a vmap the inputs did not mention (a closure):
            # broadcast the stand-ins along it too, so each batch element has its own
            scope = sorted(scope + extra, key=lambda i: i.level)
        self.scope = scope
        with enable_grad():
            self.roots = [lift(o, scope) for o in self.out_leaves]
        self.keep = _foreign_history(self.roots, self.fresh)

    def outputs(self) -> Any:
        leaves = self.out_leaves if self.keep else [_plain(o) for o in self.out_leaves]
        return unflatten(self.out_tree, leaves)

    def aux_outputs(self) -> Any:
        if self.keep or self.aux is None:
            return self.aux
        leaves, tree = flatten(self.aux)
        return unflatten(tree, [_plain(a) for a in leaves])

    def pullback(self, cotangents: Any, retain_graph: bool = True) -> tuple[Any, ...]:
        cts, tree = flatten(cotangents)
        if tree != self.out_tree:
            raise ValueError(
                f"{self.fn_name}: the cotangent must have the output's structure "
                f"{self.out_tree!r}, got {tree!r}"
            )
        plain: list[Tensor] = []
        for ct, o in zip(cts, self.out_leaves):
            if not isinstance(ct, Tensor):
                raise TypeError(
                    f"{self.fn_name}: cotangents must be tensors, got {type(ct).__name__}"
                )
            if tuple(ct._shape) != tuple(o._shape):
                raise ValueError(
                    f"Shape of cotangent input to vjp pullback function "
                    f"{tuple(ct._shape)} must be the same as the shape of the "
                    f"corresponding primal output {tuple(o._shape)}"
                )
            if ct._dtype is not o._dtype:
                if not (_is_diff_dtype(ct) and _is_diff_dtype(o)):
                    raise TypeError(
                        f"Type of cotangent input to vjp pullback function "
                        f"({ct._dtype.name}) is not the expected tangent type "
                        f"({o._dtype.name})"
                    )
                ct = ct.to(o._dtype)
            plain.append(lift(ct, self.scope))
        pairs = [
            (r, c) for r, c in zip(self.roots, plain) if r._requires_grad and _is_diff_dtype(r)
        ]
        if not pairs:
            grads = [F.zeros_like(p) for p in self.fresh]
        else:
            create = self.keep or any(bottom(c)._requires_grad for _, c in pairs)
            grads = list(
                autograd_grad(
                    [r for r, _ in pairs],
                    self.fresh,
                    [c for _, c in pairs],
                    retain_graph=retain_graph or create,
                    create_graph=create,
                    allow_unused=True,
                    materialize_grads=True,
                )
            )
        return unflatten(self.in_tree, [unlift(g, self.scope) for g in grads])


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """`(out, vjp_fn)` (or `(out, vjp_fn, aux)`): `vjp_fn(ct)` returns one cotangent per
    primal, as a tuple; it may be called many times (the graph is kept while it lives)."""
    if not callable(fun):
        raise TypeError(f"vjp: expected a callable, got {type(fun).__name__}")
    lin = Linearized("vjp", fun, primals, (), has_aux)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        return lin.pullback(cotangent)

    out = lin.outputs()
    return (out, vjp_fn, lin.aux_outputs()) if has_aux else (out, vjp_fn)


def value_and_grad(
    fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """`(value, grad)`, or `((value, aux), grad)` with `has_aux` (JAX's value_and_grad)."""
    if not callable(fun):
        raise TypeError(f"value_and_grad: expected a callable, got {type(fun).__name__}")

    @functools.wraps(fun)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        return _value_and_grad(fun, argnums, has_aux, "grad", args, kwargs)

    return value_and_grad_f


def _value_and_grad(
    fun: Callable[..., Any],
    argnums: Any,
    has_aux: bool,
    fn_name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    nums, single = _argnums(argnums, len(args), fn_name)
    diff = tuple(args[i] for i in nums)
    lin = Linearized(fn_name, _partial(fun, args, kwargs, nums), diff, (args, kwargs), has_aux)
    if lin.out_tree != TreeDef("leaf", None, (), 1):
        raise TypeError(
            f"Gradient only defined for scalar-output functions. Output was "
            f"{unflatten(lin.out_tree, ['*'] * lin.out_tree.num_leaves)!r}."
        )
    (out,) = lin.out_leaves
    if out.ndim != 0:
        raise TypeError(
            f"Gradient only defined for scalar-output functions. Output had "
            f"shape: {tuple(out._shape)}."
        )
    if not out._dtype.is_floating_point:
        raise TypeError(
            f"{fn_name} requires real-valued outputs (output dtype that is a "
            f"floating point dtype), but got {out._dtype.name}."
        )
    grads = lin.pullback(F.ones((), dtype=out._dtype), retain_graph=False)
    g = grads[0] if single else grads
    value = lin.outputs()
    return ((value, lin.aux_outputs()), g) if has_aux else (value, g)


def grad(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued `fun` with respect to the positional arguments at
    `argnums` (an int, or a tuple giving a tuple of gradients); with `has_aux`, `fun`
    returns `(value, aux)` and the result is `(grad, aux)`. Arguments may be pytrees."""
    if not callable(fun):
        raise TypeError(f"grad: expected a callable, got {type(fun).__name__}")

    @functools.wraps(fun)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        res = _value_and_grad(fun, argnums, has_aux, "grad", args, kwargs)
        if has_aux:
            (_, aux), g = res
            return g, aux
        return res[1]

    return grad_f


# --------------------------------------------------------------------------------------
# forward mode
# --------------------------------------------------------------------------------------


def jvp(fun: Callable[..., Any], primals: Any, tangents: Any, has_aux: bool = False) -> Any:
    """`(out, tangent_out)` (with `has_aux`, `(out, tangent_out, aux)`): the value of
    `fun(*primals)` and its Jacobian applied to `tangents` (JAX's jvp)."""
    if not callable(fun):
        raise TypeError(f"jvp: expected a callable, got {type(fun).__name__}")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            f"primal and tangent arguments to jvp must be tuples or lists; found "
            f"{type(primals).__name__} and {type(tangents).__name__}."
        )
    p_leaves, p_tree = flatten(tuple(primals))
    t_leaves, t_tree = flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(
            f"primal and tangent arguments to jvp must have the same tree "
            f"structure; primals have tree structure {p_tree!r} whereas tangents "
            f"have tree structure {t_tree!r}."
        )
    _check_inputs("jvp", p_leaves)
    for p, t in zip(p_leaves, t_leaves):
        if not isinstance(t, Tensor):
            raise TypeError(f"jvp: tangents must be tensors, got {type(t).__name__}")
        if tuple(p._shape) != tuple(t._shape):
            raise ValueError(
                f"jvp called with different primal and tangent shapes;Got primal "
                f"shape {tuple(p._shape)} and tangent shape as "
                f"{tuple(t._shape)}"
            )
        if p._dtype is not t._dtype:
            raise TypeError(
                f"primal and tangent arguments to jvp do not match; dtypes must "
                f"be equal. Got primal dtype {p._dtype.name} and tangent dtype "
                f"{t._dtype.name}."
            )
    if forward_ad.active():
        return _nested_jvp(fun, tuple(primals), tuple(tangents), has_aux)
    scope = union_levels(p_leaves)
    with forward_ad.dual_level():
        duals = [
            unlift(forward_ad.make_dual(lift(p, scope), lift(t, scope)), scope)
            for p, t in zip(p_leaves, t_leaves)
        ]
        result = fun(*unflatten(p_tree, duals))
        out, aux = _split_aux(result, has_aux, "jvp")
        o_leaves, o_tree = flatten(out)
        primals_out, tangents_out = [], []
        for o in o_leaves:
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"jvp: the function must return tensors (or pytrees of "
                    f"tensors), got {type(o).__name__}"
                )
            lv = levels(o)
            primal, tangent = forward_ad.unpack_dual(bottom(o))
            if tangent is None:
                tangent = F.zeros_like(primal)
            primals_out.append(unlift(primal, lv))
            tangents_out.append(unlift(tangent, lv))
        if aux is not None:
            a_leaves, a_tree = flatten(aux)
            aux = unflatten(
                a_tree,
                [
                    unlift(forward_ad.unpack_dual(bottom(a)).primal, levels(a))
                    if isinstance(a, Tensor)
                    else a
                    for a in a_leaves
                ],
            )
    res = (unflatten(o_tree, primals_out), unflatten(o_tree, tangents_out))
    return res + (aux,) if has_aux else res


def _nested_jvp(
    fun: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...], has_aux: bool
) -> Any:
    """A jvp inside another forward-mode transform (`jacfwd(jacfwd(f))`, `jvp` of `jvp`).

    A tensor carries one tangent, which belongs to the outer transform, so the inner one is
    computed by reverse mode instead: the pullback `u -> J^T u` is linear in `u`, and its
    own pullback applied to the tangents is `J t`. Both pullbacks run as recorded ops, so
    the outer transform's tangents flow through them like through any other computation
    (forward over reverse). The result keeps autograd history (and its tangent keeps
    its own) only where something outside these two linearizations needs it."""
    lin = Linearized("jvp", fun, primals, tangents, has_aux)
    seeds = tuple(F.zeros_like(o) for o in lin.out_leaves)
    pull = Linearized(
        "jvp", lambda *u: lin.pullback(unflatten(lin.out_tree, list(u))), seeds, (), False
    )
    outs = list(pull.pullback(tuple(tangents)))
    ours = lin.fresh + pull.fresh
    given = [bottom(x) for x in flatten((primals, tangents))[0] if isinstance(x, Tensor)]
    differentiable_tangents = any(
        forward_ad.tangent_of(x) is not None and forward_ad.tangent_of(x)._requires_grad
        for x in given
    )
    outs = [_internal_history_dropped(o, ours, differentiable_tangents) for o in outs]
    result = (lin.outputs(), unflatten(lin.out_tree, outs))
    return result + (lin.aux_outputs(),) if has_aux else result


def _internal_history_dropped(t: Tensor, ours: Sequence[Tensor], keep_tangent: bool) -> Tensor:
    """`t` without the autograd history of the linearizations that made it: kept only when
    it reaches a tensor beyond `ours` (an enclosing reverse-mode transform's input, a
    closed-over tensor that requires grad). Its tangent's history goes with it, unless
    the outer tangents were themselves differentiable (`keep_tangent`); otherwise it only
    reaches internal stand-ins (`ours`, and the ones transposed jvp rules make)."""
    b = bottom(t)
    foreign = b._requires_grad and _foreign_history([b], ours)
    tangent = forward_ad.tangent_of(b)
    if tangent is not None and not (foreign or keep_tangent):
        tangent = tangent.detach()
    if foreign:
        return t
    d = b.detach()
    if tangent is not None:
        forward_ad.set_tangent(d, tangent)
    return unlift(d, levels(t))


def transposed_jvp(
    opdef: Any, operands: Sequence[Any], attrs: dict[str, Any], out: Tensor
) -> Tensor | None:
    """`J t` for an op known only by its vjp, with batched tangents: the vjp is linear in
    its cotangent `u`, so `J t = d<vjp(u), t>/du`, one gradient per batch element."""
    tangents = [forward_ad.tangent_of(o) for o in operands]
    ctx = forward_ad._JvpContext(operands, out, tuple(t is not None for t in tangents))

    def pairing(u: Tensor) -> Tensor:
        parts = opdef.vjp(ctx, u, **attrs)
        parts = parts if isinstance(parts, tuple) else (parts,)
        total = F.sum(F.mul(u, 0.0))
        for i, (p, t) in enumerate(zip(parts, tangents)):
            if p is None or t is None:
                continue
            shape = ctx.input_meta[i][0]
            if tuple(p._shape) != tuple(shape):
                p = F.sum_to_size(p, shape)
            total = F.add(total, F.sum(F.mul(p, t.to(p._dtype))))
        return total

    return grad(pairing)(F.zeros(tuple(out._shape), dtype=out._dtype))
