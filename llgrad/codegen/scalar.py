"""The scalar language of `llgrad.ir.scalar`, implemented on an llvmlite IRBuilder.

Values are `SV(value, dtype)`. float16 and bfloat16 values are held in float32 registers
and rounded back to their type after every op that produces them, so a fused chain gives
the same bits as running the ops one by one. bool is `i1` in registers and a byte in memory.
Nothing here emits a call: transcendentals come from `mathlib` as inline code, and integer
operations that are undefined behaviour in LLVM (division by zero, INT_MIN / -1,
out-of-range float-to-int casts) are guarded so generated code cannot trap.

complex64/complex128 values are `SV((re, im), dtype)`: two float registers, stored
interleaved in memory as `[2 x float]` (NumPy's and PyTorch's layout). Keeping the halves
in separate registers lets LLVM vectorize complex loops as interleaved loads and stores of
plain floats; the arithmetic lives in `ComplexOps` below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType
from . import mathlib

FLAGS = ("reassoc", "contract")  # never nnan/ninf: NaN and Inf behave as in NumPy

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()


C64, C128 = ir.ArrayType(F32, 2), ir.ArrayType(F64, 2)


def llvm_type(d: DType) -> ir.Type:
    """The register type a dtype computes in (complex: the pair type, for stack slots)."""
    return {
        "bool": I1,
        "uint8": I8,
        "int8": I8,
        "int16": I16,
        "int32": I32,
        "int64": I64,
        "float16": F32,
        "bfloat16": F32,
        "float32": F32,
        "float64": F64,
        "complex64": C64,
        "complex128": C128,
    }[d.name]


def memory_type(d: DType) -> ir.Type:
    """The type a dtype is stored as."""
    return {
        "bool": I8,
        "uint8": I8,
        "int8": I8,
        "int16": I16,
        "int32": I32,
        "int64": I64,
        "float16": F16,
        "bfloat16": I16,
        "float32": F32,
        "float64": F64,
        "complex64": C64,
        "complex128": C128,
    }[d.name]


def component_type(d: DType) -> ir.Type:
    """The float type of each half of a complex dtype."""
    return F32 if d is dt.complex64 else F64


@dataclass(frozen=True, slots=True)
class SV:
    """A scalar value: one register, or for complex dtypes a `(re, im)` pair of them."""

    value: Any
    dtype: DType


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Declare an intrinsic with an explicit signature (llvmlite guesses some wrong)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def _real_only(op: str, d: DType) -> None:
    if d.is_complex:
        raise TypeError(f"{op}: not defined for {d.name} in generated code")


def _suffix(t: ir.Type) -> str:
    return {F32: "f32", F64: "f64", F16: "f16"}.get(t, str(t))


class LLVMScalar:
    def __init__(self, builder: ir.IRBuilder, index: ir.Value | None = None):
        self.b = builder
        self.module: ir.Module = builder.module
        self._index = index
        self.cx = ComplexOps(self)

    def index(self) -> SV:
        """The linear index of the element being computed (random number generation)."""
        if self._index is None:
            raise TypeError("this kernel has no element index")
        return SV(self._index, dt.int64)

    def shr(self, a: SV, bits: int) -> SV:
        """Logical shift right of an integer's bits."""
        return SV(self.b.lshr(a.value, a.value.type(bits)), a.dtype)

    # -- memory ---------------------------------------------------------------------------
    def load(self, ptr: ir.Value, dtype: DType, name: str = "") -> SV:
        if dtype.is_complex:
            return self.cx.load(ptr, dtype, name)
        b = self.b
        raw = b.load(ptr, typ=memory_type(dtype), name=name)
        if dtype is dt.bool_:
            return SV(b.icmp_unsigned("!=", raw, I8(0)), dtype)
        if dtype is dt.float16:
            return SV(b.fpext(raw, F32), dtype)
        if dtype is dt.bfloat16:
            wide = b.shl(b.zext(raw, I32), I32(16))
            return SV(b.bitcast(wide, F32), dtype)
        return SV(raw, dtype)

    def store(self, v: SV, ptr: ir.Value) -> None:
        if v.dtype.is_complex:
            self.cx.store(v, ptr)
            return
        b = self.b
        x = v.value
        if v.dtype is dt.bool_:
            x = b.zext(x, I8)
        elif v.dtype is dt.float16:
            x = b.fptrunc(x, F16)
        elif v.dtype is dt.bfloat16:
            x = self._bf16_bits(x)
        b.store(x, ptr)

    def _bf16_bits(self, x: ir.Value) -> ir.Value:
        """float32 -> bfloat16 bits, round to nearest even, NaN kept quiet."""
        b = self.b
        bits = b.bitcast(x, I32)
        lsb = b.and_(b.lshr(bits, I32(16)), I32(1))
        rounded = b.lshr(b.add(bits, b.add(I32(0x7FFF), lsb)), I32(16))
        isnan = b.fcmp_unordered("uno", x, x)
        quiet = b.or_(b.lshr(bits, I32(16)), I32(0x40))
        return b.trunc(b.select(isnan, quiet, rounded), I16)

    def _round_to(self, x: ir.Value, d: DType) -> ir.Value:
        """Round a float32 register to float16/bfloat16 precision and widen it back."""
        b = self.b
        if d is dt.float16:
            return b.fpext(b.fptrunc(x, F16), F32)
        if d is dt.bfloat16:
            return b.bitcast(b.shl(b.zext(self._bf16_bits(x), I32), I32(16)), F32)
        return x

    def _fix(self, x: ir.Value, d: DType) -> SV:
        return SV(self._round_to(x, d) if d in (dt.float16, dt.bfloat16) else x, d)

    # -- constants and types --------------------------------------------------------------
    def const(self, value: Any, dtype: DType) -> SV:
        if dtype.is_complex:
            return self.cx.const(value, dtype)
        t = llvm_type(dtype)
        if dtype.is_floating_point:
            return SV(ir.Constant(t, float(value)), dtype)
        if dtype is dt.bool_:
            return SV(ir.Constant(I1, int(bool(value))), dtype)
        return SV(ir.Constant(t, int(value)), dtype)

    def dtype_of(self, v: SV) -> DType:
        return v.dtype

    # -- arithmetic -----------------------------------------------------------------------
    def _arith(self, fop: str, iop: str, a: SV, b: SV) -> SV:
        d = a.dtype
        if d.is_floating_point:
            return self._fix(getattr(self.b, fop)(a.value, b.value, flags=FLAGS), d)
        return SV(getattr(self.b, iop)(a.value, b.value), d)

    def add(self, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.add(a, b)
        if a.dtype is dt.bool_:
            return SV(self.b.or_(a.value, b.value), a.dtype)
        return self._arith("fadd", "add", a, b)

    def sub(self, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.sub(a, b)
        return self._arith("fsub", "sub", a, b)

    def mul(self, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.mul(a, b)
        if a.dtype is dt.bool_:
            return SV(self.b.and_(a.value, b.value), a.dtype)
        return self._arith("fmul", "mul", a, b)

    def div(self, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.div(a, b)
        if not a.dtype.is_floating_point:
            raise TypeError(f"div: true division needs floats, got {a.dtype.name}")
        return self._fix(self.b.fdiv(a.value, b.value, flags=FLAGS), a.dtype)

    def neg(self, a: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.neg(a)
        if a.dtype.is_floating_point:
            return SV(self.b.fneg(a.value), a.dtype)
        return SV(self.b.neg(a.value), a.dtype)

    def _safe_divisor(self, a: SV, b: SV) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Integer division guards: x/0 -> 0 and INT_MIN/-1 -> INT_MIN, no trap."""
        bd = self.b
        t = b.value.type
        zero = bd.icmp_signed("==", b.value, t(0))
        minus1 = bd.icmp_signed("==", b.value, t(-1))
        bad = bd.or_(zero, minus1)
        safe_b = bd.select(bad, t(1), b.value)
        return safe_b, zero, minus1

    def _unsigned_divide(self, op: Any, a: SV, b: SV) -> SV:
        """`op` (udiv or urem) with a divisor of 0 giving 0, no trap."""
        t = b.value.type
        zero = self.b.icmp_unsigned("==", b.value, t(0))
        return SV(
            self.b.select(zero, t(0), op(a.value, self.b.select(zero, t(1), b.value))), a.dtype
        )

    def floordiv(self, a: SV, b: SV) -> SV:
        d = a.dtype
        _real_only("floordiv", d)
        bd = self.b
        if d.is_floating_point:
            return self._fix(self._float_floordiv(a.value, b.value), d)
        if d.kind == "u" or d is dt.bool_:
            return self._unsigned_divide(bd.udiv, a, b)
        safe_b, zero, minus1 = self._safe_divisor(a, b)
        t = a.value.type
        q = bd.sdiv(a.value, safe_b)
        r = bd.srem(a.value, safe_b)
        # C division truncates; floor division rounds down when the signs differ
        adjust = bd.and_(
            bd.icmp_signed("!=", r, t(0)), bd.icmp_signed("<", bd.xor(r, safe_b), t(0))
        )
        q = bd.sub(q, bd.zext(adjust, t))
        q = bd.select(minus1, bd.neg(a.value), q)
        return SV(bd.select(zero, t(0), q), d)

    def _float_floordiv(self, a: ir.Value, b: ir.Value) -> ir.Value:
        """Python's (and PyTorch's) float floor division, not `floor(a / b)`: the quotient
        of `a - fmod(a, b)` (exact), one less when the remainder's sign differs from the
        divisor's, rounded to the nearest integer; a zero quotient takes the sign of
        `a / b`; a zero divisor gives `a / b`. So `-2.5 // inf` is -1 (not -0.0) and
        `1 // 0.1` is 9 (not 10). No fast-math flags: every step is exact or IEEE."""
        bd = self.b
        t = a.type
        zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
        mod = bd.frem(a, b)
        div = bd.fdiv(bd.fsub(a, mod), b)
        differ = bd.xor(bd.fcmp_ordered("<", b, zero), bd.fcmp_ordered("<", mod, zero))
        adjust = bd.and_(bd.fcmp_unordered("!=", mod, zero), differ)
        div = bd.select(adjust, bd.fsub(div, one), div)
        floor = self._call_unary("llvm.floor", div)
        floor = bd.select(
            bd.fcmp_ordered(">", bd.fsub(div, floor), ir.Constant(t, 0.5)),
            bd.fadd(floor, one),
            floor,
        )
        quotient = bd.fdiv(a, b)
        copysign = intrinsic(self.module, f"llvm.copysign.{_suffix(t)}", t, [t, t])
        out = bd.select(
            bd.fcmp_ordered("==", div, zero), bd.call(copysign, [zero, quotient]), floor
        )
        return bd.select(bd.fcmp_ordered("==", b, zero), quotient, out)

    def fmod(self, a: SV, b: SV) -> SV:
        """C's fmod: the remainder of truncated division, with the dividend's sign (exact
        for floats); an integer divisor of 0 gives 0 (the frontend refuses it first)."""
        d = a.dtype
        _real_only("fmod", d)
        bd = self.b
        if d.is_floating_point:
            return self._fix(bd.frem(a.value, b.value), d)
        if d.kind == "u" or d is dt.bool_:
            return self._unsigned_divide(bd.urem, a, b)
        safe_b, zero, minus1 = self._safe_divisor(a, b)
        r = bd.srem(a.value, safe_b)
        return SV(bd.select(bd.or_(zero, minus1), a.value.type(0), r), d)

    def rem(self, a: SV, b: SV) -> SV:
        """Python's modulo: the result has the divisor's sign."""
        d = a.dtype
        _real_only("rem", d)
        bd = self.b
        if d.is_floating_point:
            r = bd.frem(a.value, b.value)
            fix = bd.and_(
                bd.fcmp_ordered("!=", r, r.type(0.0)),
                bd.xor(
                    bd.fcmp_ordered("<", r, r.type(0.0)), bd.fcmp_ordered("<", b.value, r.type(0.0))
                ),
            )
            return self._fix(bd.select(fix, bd.fadd(r, b.value), r), d)
        if d.kind == "u" or d is dt.bool_:
            return self._unsigned_divide(bd.urem, a, b)
        safe_b, zero, minus1 = self._safe_divisor(a, b)
        t = a.value.type
        r = bd.srem(a.value, safe_b)
        fix = bd.and_(bd.icmp_signed("!=", r, t(0)), bd.icmp_signed("<", bd.xor(r, safe_b), t(0)))
        r = bd.select(fix, bd.add(r, safe_b), r)
        return SV(bd.select(bd.or_(zero, minus1), t(0), r), d)

    def _minmax(self, which: str, a: SV, b: SV) -> SV:
        d = a.dtype
        _real_only(which, d)
        bd = self.b
        if d.is_floating_point:
            # NaN-propagating, as torch.maximum: pick by compare, then let NaN through
            t = a.value.type
            pick = bd.fcmp_ordered(">" if which == "max" else "<", a.value, b.value)
            r = bd.select(pick, a.value, b.value)
            anynan = bd.fcmp_unordered("uno", a.value, b.value)
            return SV(bd.select(anynan, ir.Constant(t, float("nan")), r), d)
        signed = d.kind == "i"
        cmp = bd.icmp_signed if signed else bd.icmp_unsigned
        pick = cmp(">" if which == "max" else "<", a.value, b.value)
        return SV(bd.select(pick, a.value, b.value), d)

    def max(self, a: SV, b: SV) -> SV:
        return self._minmax("max", a, b)

    def min(self, a: SV, b: SV) -> SV:
        return self._minmax("min", a, b)

    _FCMP = {
        "eq": ("oeq", True),
        "ne": ("une", False),
        "lt": ("olt", True),
        "le": ("ole", True),
        "gt": ("ogt", True),
        "ge": ("oge", True),
    }
    _ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

    def cmp(self, pred: str, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.cmp(pred, a, b)
        bd = self.b
        if a.dtype.is_floating_point:
            code, ordered = self._FCMP[pred]
            fn = bd.fcmp_ordered if ordered else bd.fcmp_unordered
            return SV(fn(self._FCMP_SYMBOL[code], a.value, b.value), dt.bool_)
        fn = bd.icmp_signed if a.dtype.kind == "i" else bd.icmp_unsigned
        return SV(fn(self._ICMP[pred], a.value, b.value), dt.bool_)

    _FCMP_SYMBOL = {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">="}

    def select(self, c: SV, a: SV, b: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.select(c, a, b)
        return SV(self.b.select(c.value, a.value, b.value), a.dtype)

    def logical(self, op: str, a: SV, b: SV | None = None) -> SV:
        bd = self.b
        if op == "not":
            return SV(bd.xor(a.value, I1(1)), dt.bool_)
        fn = {"and": bd.and_, "or": bd.or_, "xor": bd.xor}[op]
        return SV(fn(a.value, b.value), dt.bool_)

    def bitwise(self, op: str, a: SV, b: SV | None = None) -> SV:
        bd = self.b
        if op == "not":
            return SV(bd.not_(a.value), a.dtype)
        fn = {"and": bd.and_, "or": bd.or_, "xor": bd.xor}[op]
        return SV(fn(a.value, b.value), a.dtype)

    def isnan(self, a: SV) -> SV:
        if a.dtype.is_complex:
            return self.cx.isnan(a)
        if not a.dtype.is_floating_point:
            return SV(I1(0), dt.bool_)
        return SV(self.b.fcmp_unordered("uno", a.value, a.value), dt.bool_)

    # -- complex parts --------------------------------------------------------------------
    def real(self, z: SV) -> SV:
        """The real part of a complex value, in the matching real dtype."""
        return SV(self.cx.parts(z)[0], z.dtype.to_real())

    def imag(self, z: SV) -> SV:
        return SV(self.cx.parts(z)[1], z.dtype.to_real())

    def complex(self, re: SV, im: SV) -> SV:
        """A complex value from two real values of one dtype (float32 or float64)."""
        if re.dtype not in (dt.float32, dt.float64) or im.dtype is not re.dtype:
            raise TypeError(
                f"complex: parts must both be float32 or float64, got "
                f"{re.dtype.name} and {im.dtype.name}"
            )
        return SV((re.value, im.value), re.dtype.to_complex())

    def conj(self, z: SV) -> SV:
        if not z.dtype.is_complex:
            return z
        re, im = self.cx.parts(z)
        return SV((re, self.b.fneg(im)), z.dtype)

    # -- casts ----------------------------------------------------------------------------
    def cast(self, a: SV, to: DType) -> SV:
        bd = self.b
        src, x = a.dtype, a.value
        if src is to:
            return a
        if src.is_complex or to.is_complex:
            return self.cx.cast(a, to)
        tt = llvm_type(to)
        if to is dt.bool_:
            if src.is_floating_point:
                return SV(bd.fcmp_unordered("!=", x, x.type(0.0)), to)
            return SV(bd.icmp_unsigned("!=", x, x.type(0)), to)
        if src is dt.bool_:
            return SV(bd.uitofp(x, tt) if to.is_floating_point else bd.zext(x, tt), to)
        if src.is_floating_point and to.is_floating_point:
            st = x.type
            if st == tt:
                return self._fix(x, to)
            y = bd.fpext(x, tt) if st == F32 else bd.fptrunc(x, tt)
            return self._fix(y, to)
        if src.is_floating_point:
            # saturating conversion to int64 (NaN -> 0, never poison), then wrap into
            # narrower integers as PyTorch and NumPy do (-2.0 -> 254 for uint8)
            wide = I64 if tt.width < 32 else tt
            fn = intrinsic(self.module, f"llvm.fptosi.sat.{wide}.{_suffix(x.type)}", wide, [x.type])
            y = bd.call(fn, [x])
            return SV(bd.trunc(y, tt) if wide is not tt else y, to)
        if to.is_floating_point:
            y = bd.sitofp(x, tt) if src.kind == "i" else bd.uitofp(x, tt)
            return self._fix(y, to)
        sw, tw = x.type.width, tt.width
        if sw == tw:
            return SV(x, to)
        if sw > tw:
            return SV(bd.trunc(x, tt), to)
        return SV(bd.sext(x, tt) if src.kind == "i" else bd.zext(x, tt), to)

    # -- math -----------------------------------------------------------------------------
    def _call_unary(self, name: str, x: ir.Value) -> ir.Value:
        fn = intrinsic(self.module, f"{name}.{_suffix(x.type)}", x.type, [x.type])
        return self.b.call(fn, [x])

    _INTRINSIC_UNARY = {
        "floor": "llvm.floor",
        "ceil": "llvm.ceil",
        "round": "llvm.roundeven",
        "trunc": "llvm.trunc",
        "abs": "llvm.fabs",
        "sqrt": "llvm.sqrt",
    }

    def math(self, name: str, *args: SV, **params: int) -> SV:
        """`name(*args)` (`params`: a parametrized mathlib function's, polygamma's order)."""
        d = args[0].dtype
        if d.is_complex:
            return self.cx.math(name, *args)
        if name == "pow" and not d.is_floating_point:
            return self._int_pow(args[0], args[1])
        if not d.is_floating_point:
            if name in ("floor", "ceil", "round", "trunc"):
                return args[0]
            raise TypeError(f"{name}: not defined for {d.name} in generated code")
        if name in self._INTRINSIC_UNARY:
            return self._fix(self._call_unary(self._INTRINSIC_UNARY[name], args[0].value), d)

        return self._fix(mathlib.emit(self.b, name, [a.value for a in args], **params), d)

    def _int_pow(self, a: SV, e: SV) -> SV:
        """Binary exponentiation (wrapping, as PyTorch) in a loop that runs while bits of
        the exponent remain. (Unrolled over all 64 bits it took LLVM -O3 minutes.)"""
        bd = self.b
        t = a.value.type
        fn = bd.function
        pre = bd.block
        loop = fn.append_basic_block("ipow.loop")
        done = fn.append_basic_block("ipow.done")
        start = (
            bd.select(bd.icmp_signed("<", e.value, t(0)), t(0), e.value)
            if a.dtype.kind == "i"
            else e.value
        )
        bd.cbranch(bd.icmp_unsigned("!=", start, t(0)), loop, done)
        bd.position_at_end(loop)
        acc = bd.phi(t, name="ipow.acc")
        base = bd.phi(t, name="ipow.base")
        exp = bd.phi(t, name="ipow.exp")
        acc.add_incoming(t(1), pre)
        base.add_incoming(a.value, pre)
        exp.add_incoming(start, pre)
        bit = bd.trunc(exp, I1)
        acc_next = bd.select(bit, bd.mul(acc, base), acc)
        base_next = bd.mul(base, base)
        exp_next = bd.lshr(exp, t(1))
        acc.add_incoming(acc_next, loop)
        base.add_incoming(base_next, loop)
        exp.add_incoming(exp_next, loop)
        bd.cbranch(bd.icmp_unsigned("!=", exp_next, t(0)), loop, done)
        bd.position_at_end(done)
        result = bd.phi(t, name="ipow")
        result.add_incoming(t(1), pre)
        result.add_incoming(acc_next, loop)
        if a.dtype.kind == "i":
            # negative exponents: 1 for base 1, +-1 for base -1, else 0 (C semantics)
            neg = bd.icmp_signed("<", e.value, t(0))
            one = bd.icmp_signed("==", a.value, t(1))
            mone = bd.icmp_signed("==", a.value, t(-1))
            odd = bd.trunc(e.value, I1)
            negval = bd.select(one, t(1), bd.select(mone, bd.select(odd, t(-1), t(1)), t(0)))
            result = bd.select(neg, negval, result)
        return SV(result, a.dtype)


# ---------------------------------------------------------------------------------------
# Complex numbers
# ---------------------------------------------------------------------------------------

Pair = tuple[ir.Value, ir.Value]
_INF, _NAN = float("inf"), float("nan")


class _Real:
    """Float arithmetic on one LLVM float type; Python numbers become constants.

    The complex code below is written with these. No fast-math flags: its special values
    (inf and NaN components) are patched with selects, and `contract` would turn
    `a*b - c*d` into an fma whose rounding makes `z * conj(z)` gain an imaginary part.
    """

    def __init__(self, b: ir.IRBuilder, t: ir.Type):
        self.b = b
        self.t = t

    def v(self, x: Any) -> ir.Value:
        return x if isinstance(x, ir.Value) else ir.Constant(self.t, float(x))

    def add(self, x: Any, y: Any) -> ir.Value:
        return self.b.fadd(self.v(x), self.v(y))

    def sub(self, x: Any, y: Any) -> ir.Value:
        return self.b.fsub(self.v(x), self.v(y))

    def mul(self, x: Any, y: Any) -> ir.Value:
        return self.b.fmul(self.v(x), self.v(y))

    def div(self, x: Any, y: Any) -> ir.Value:
        return self.b.fdiv(self.v(x), self.v(y))

    def neg(self, x: ir.Value) -> ir.Value:
        return self.b.fneg(x)

    def _intrinsic(self, name: str, *args: Any) -> ir.Value:
        fn = intrinsic(self.b.module, f"{name}.{_suffix(self.t)}", self.t, [self.t] * len(args))
        return self.b.call(fn, [self.v(a) for a in args])

    def fabs(self, x: ir.Value) -> ir.Value:
        return self._intrinsic("llvm.fabs", x)

    def sqrt(self, x: ir.Value) -> ir.Value:
        return self._intrinsic("llvm.sqrt", x)

    def copysign(self, mag: Any, sign: ir.Value) -> ir.Value:
        return self._intrinsic("llvm.copysign", mag, sign)

    def math(self, name: str, *args: Any) -> ir.Value:
        return mathlib.emit(self.b, name, [self.v(a) for a in args])

    def lt(self, x: Any, y: Any) -> ir.Value:
        return self.b.fcmp_ordered("<", self.v(x), self.v(y))

    def le(self, x: Any, y: Any) -> ir.Value:
        return self.b.fcmp_ordered("<=", self.v(x), self.v(y))

    def gt(self, x: Any, y: Any) -> ir.Value:
        return self.b.fcmp_ordered(">", self.v(x), self.v(y))

    def ge(self, x: Any, y: Any) -> ir.Value:
        return self.b.fcmp_ordered(">=", self.v(x), self.v(y))

    def eq(self, x: Any, y: Any) -> ir.Value:
        return self.b.fcmp_ordered("==", self.v(x), self.v(y))

    def ne(self, x: Any, y: Any) -> ir.Value:
        """Unordered: NaN != anything."""
        return self.b.fcmp_unordered("!=", self.v(x), self.v(y))

    def isnan(self, x: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def isinf(self, x: ir.Value) -> ir.Value:
        return self.eq(self.fabs(x), _INF)

    def isfinite(self, x: ir.Value) -> ir.Value:
        return self.lt(self.fabs(x), _INF)

    def select(self, c: ir.Value, x: Any, y: Any) -> ir.Value:
        return self.b.select(c, self.v(x), self.v(y))

    def and_(self, p: ir.Value, q: ir.Value) -> ir.Value:
        return self.b.and_(p, q)

    def or_(self, p: ir.Value, q: ir.Value) -> ir.Value:
        return self.b.or_(p, q)

    def not_(self, p: ir.Value) -> ir.Value:
        return self.b.xor(p, I1(1))

    def select_pair(self, c: ir.Value, x: tuple[Any, Any], y: tuple[Any, Any]) -> Pair:
        return self.select(c, x[0], y[0]), self.select(c, x[1], y[1])


class ComplexOps:
    """The complex half of the scalar language: values are `(re, im)` register pairs.

    Arithmetic runs in the dtype's own precision with NumPy's formulas (the textbook
    product; Smith's quotient with NumPy's zero-divisor rule), so results match NumPy's
    loops. Transcendental functions of complex64 run in float64 and round once at the end:
    float64 intermediates cannot overflow or lose accuracy for float32 inputs, which
    removes the rescaling careful complex64 code otherwise needs. Special values (inf and
    NaN components) follow C99 Annex G, as NumPy does, for exp, log, sqrt, sin, cos, tanh
    and abs; the other functions are compositions of these.
    """

    def __init__(self, s: "LLVMScalar"):
        self.s = s
        self.b = s.b

    # -- plumbing -------------------------------------------------------------------------
    @staticmethod
    def parts(z: SV) -> Pair:
        if not z.dtype.is_complex:
            raise TypeError(f"expected a complex value, got {z.dtype.name}")
        return z.value

    def real_ops(self, d: DType) -> _Real:
        return _Real(self.b, component_type(d))

    def const(self, value: Any, d: DType) -> SV:
        z = complex(value)
        t = component_type(d)
        return SV((ir.Constant(t, z.real), ir.Constant(t, z.imag)), d)

    def _halves(self, ptr: ir.Value, d: DType) -> tuple[ir.Value, ir.Value]:
        """Addresses of the real and imaginary parts of the element at `ptr`."""
        pair = memory_type(d)
        return tuple(
            self.b.gep(ptr, [I64(0), I32(k)], inbounds=True, source_etype=pair) for k in (0, 1)
        )

    def load(self, ptr: ir.Value, d: DType, name: str = "") -> SV:
        t = component_type(d)
        p_re, p_im = self._halves(ptr, d)
        re = self.b.load(p_re, typ=t, name=f"{name}.re" if name else "")
        im = self.b.load(p_im, typ=t, name=f"{name}.im" if name else "")
        return SV((re, im), d)

    def store(self, v: SV, ptr: ir.Value) -> None:
        p_re, p_im = self._halves(ptr, v.dtype)
        re, im = v.value
        self.b.store(re, p_re)
        self.b.store(im, p_im)

    # -- arithmetic -----------------------------------------------------------------------
    def add(self, x: SV, y: SV) -> SV:
        R = self.real_ops(x.dtype)
        (a, b), (c, d) = x.value, y.value
        return SV((R.add(a, c), R.add(b, d)), x.dtype)

    def sub(self, x: SV, y: SV) -> SV:
        R = self.real_ops(x.dtype)
        (a, b), (c, d) = x.value, y.value
        return SV((R.sub(a, c), R.sub(b, d)), x.dtype)

    def mul(self, x: SV, y: SV) -> SV:
        R = self.real_ops(x.dtype)
        return SV(_mul(R, x.value, y.value), x.dtype)

    def div(self, x: SV, y: SV) -> SV:
        R = self.real_ops(x.dtype)
        return SV(_div(R, x.value, y.value), x.dtype)

    def neg(self, x: SV) -> SV:
        a, b = x.value
        return SV((self.b.fneg(a), self.b.fneg(b)), x.dtype)

    def cmp(self, pred: str, x: SV, y: SV) -> SV:
        """Only equality is defined for complex numbers (PyTorch refuses `<` too)."""
        R = self.real_ops(x.dtype)
        (a, b), (c, d) = x.value, y.value
        if pred == "eq":
            return SV(R.and_(R.eq(a, c), R.eq(b, d)), dt.bool_)
        if pred == "ne":
            return SV(R.or_(R.ne(a, c), R.ne(b, d)), dt.bool_)
        raise TypeError(f"{pred}: not defined for {x.dtype.name} (complex numbers are not ordered)")

    def select(self, c: SV, x: SV, y: SV) -> SV:
        R = self.real_ops(x.dtype)
        return SV(R.select_pair(c.value, x.value, y.value), x.dtype)

    def isnan(self, x: SV) -> SV:
        R = self.real_ops(x.dtype)
        a, b = x.value
        return SV(R.or_(R.isnan(a), R.isnan(b)), dt.bool_)

    def cast(self, x: SV, to: DType) -> SV:
        """real -> complex: imaginary part 0; complex -> real: the real part (PyTorch);
        complex -> bool: either part non-zero."""
        s = self.s
        src = x.dtype
        if to.is_complex:
            if src.is_complex:
                re, im = x.value
                rd, td = src.to_real(), to.to_real()
                return SV((s.cast(SV(re, rd), td).value, s.cast(SV(im, rd), td).value), to)
            re = s.cast(x, to.to_real()).value
            return SV((re, ir.Constant(component_type(to), 0.0)), to)
        re, im = x.value
        if to is dt.bool_:
            R = self.real_ops(src)
            return SV(R.or_(R.ne(re, 0.0), R.ne(im, 0.0)), to)
        return s.cast(SV(re, src.to_real()), to)

    # -- functions ------------------------------------------------------------------------
    def math(self, name: str, *args: SV) -> SV:
        d = args[0].dtype
        if name == "abs":
            return self.abs(args[0])
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise TypeError(f"{name}: not defined for {d.name} in generated code")
        R = _Real(self.b, F64)
        halves = [v for z in args for v in self._widen(z)]
        re, im = fn(R, *halves)
        if d is dt.complex64:
            re, im = self.b.fptrunc(re, F32), self.b.fptrunc(im, F32)
        return SV((re, im), d)

    def _widen(self, z: SV) -> Pair:
        re, im = z.value
        if z.dtype is dt.complex64:
            return self.b.fpext(re, F64), self.b.fpext(im, F64)
        return re, im

    def abs(self, z: SV) -> SV:
        """|z| in the real dtype: complex64 exactly via float64 squares, complex128 scaled."""
        if z.dtype is dt.complex64:
            R = _Real(self.b, F64)
            x, y = self._widen(z)
            r = R.sqrt(R.add(R.mul(x, x), R.mul(y, y)))
            r = R.select(R.or_(R.isinf(x), R.isinf(y)), _INF, r)
            return SV(self.b.fptrunc(r, F32), dt.float32)
        R = self.real_ops(z.dtype)
        return SV(_hypot(R, *z.value), dt.float64)


# Pure functions on pairs: R is the float type they compute in.


def _mul(R: _Real, x: Pair, y: Pair) -> Pair:
    (a, b), (c, d) = x, y
    return R.sub(R.mul(a, c), R.mul(b, d)), R.add(R.mul(a, d), R.mul(b, c))


def _div(R: _Real, x: Pair, y: Pair) -> Pair:
    """Smith's algorithm, exactly as NumPy's loop (x / 0 gives inf or NaN parts)."""
    (a, b), (c, d) = x, y
    ac, ad = R.fabs(c), R.fabs(d)
    rat1 = R.div(d, c)
    scl1 = R.div(1.0, R.add(c, R.mul(d, rat1)))
    big_re = R.mul(R.add(a, R.mul(b, rat1)), scl1)
    big_im = R.mul(R.sub(b, R.mul(a, rat1)), scl1)
    rat2 = R.div(c, d)
    scl2 = R.div(1.0, R.add(d, R.mul(c, rat2)))
    small_re = R.mul(R.add(R.mul(a, rat2), b), scl2)
    small_im = R.mul(R.sub(R.mul(b, rat2), a), scl2)
    zero = R.and_(R.eq(ac, 0.0), R.eq(ad, 0.0))
    first = R.select_pair(zero, (R.div(a, ac), R.div(b, ac)), (big_re, big_im))
    return R.select_pair(R.ge(ac, ad), first, (small_re, small_im))


def _hypot(R: _Real, x: ir.Value, y: ir.Value) -> ir.Value:
    """sqrt(x^2 + y^2) without overflow; inf wins over NaN (C99)."""
    ax, ay = R.fabs(x), R.fabs(y)
    x_big = R.ge(ax, ay)
    hi, lo = R.select(x_big, ax, ay), R.select(x_big, ay, ax)
    ratio = R.div(lo, hi)
    r = R.mul(hi, R.sqrt(R.add(1.0, R.mul(ratio, ratio))))
    r = R.select(R.eq(lo, 0.0), hi, r)
    return R.select(R.or_(R.isinf(x), R.isinf(y)), _INF, r)


def _exp(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """e^x (cos y + i sin y); e^x is split in two halves past 700 so that a tiny cos/sin
    can still bring the product back into range."""
    big = R.gt(x, 700.0)
    h = R.math("exp", R.select(big, R.mul(x, 0.5), x))
    c, s = R.math("cos", y), R.math("sin", y)
    re, im = R.mul(h, c), R.mul(h, s)
    re = R.select(big, R.mul(re, h), re)
    im = R.select(big, R.mul(im, h), im)
    # C99 Annex G: exp(x + 0i) = e^x + 0i; exp(-inf + i (inf|nan)) = 0;
    # exp(+inf + i (inf|nan)) = inf + nan i
    ex = R.select(big, R.mul(h, h), h)
    y_zero = R.eq(y, 0.0)
    re, im = R.select(y_zero, ex, re), R.select(y_zero, y, im)
    y_bad = R.not_(R.isfinite(y))
    to_zero = R.and_(R.eq(x, -_INF), y_bad)
    re, im = R.select(to_zero, 0.0, re), R.select(to_zero, R.copysign(0.0, y), im)
    to_inf = R.and_(R.eq(x, _INF), y_bad)
    return R.select(to_inf, _INF, re), R.select(to_inf, _NAN, im)


def _log(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """log|z| + i arg z; near |z| = 1, log|z| = log1p((hi-1)(hi+1) + lo^2) / 2 keeps the
    digits a rounded |z| would lose."""
    ax, ay = R.fabs(x), R.fabs(y)
    x_big = R.ge(ax, ay)
    hi, lo = R.select(x_big, ax, ay), R.select(x_big, ay, ax)
    near = R.and_(R.ge(hi, 0.5), R.le(hi, 2.0))
    t = R.add(R.mul(R.sub(hi, 1.0), R.add(hi, 1.0)), R.mul(lo, lo))
    re = R.select(near, R.mul(0.5, R.math("log1p", t)), R.math("log", _hypot(R, x, y)))
    return re, R.math("atan2", y, x)


def _sqrt(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """The principal root from t = sqrt((|x| + |z|) / 2) (no cancellation), with the
    input rescaled near overflow and underflow."""
    ax, ay = R.fabs(x), R.fabs(y)
    hi = R.select(R.ge(ax, ay), ax, ay)
    big, tiny = R.gt(hi, 2.0**1020), R.lt(hi, 2.0**-1000)
    scale = R.select(big, 0.25, R.select(tiny, 2.0**200, 1.0))
    unscale = R.select(big, 2.0, R.select(tiny, 2.0**-100, 1.0))
    xs, ys = R.mul(x, scale), R.mul(y, scale)
    t = R.sqrt(R.mul(R.add(R.fabs(xs), _hypot(R, xs, ys)), 0.5))
    two_t = R.mul(t, 2.0)
    right = (t, R.div(ys, two_t))
    left = (R.div(R.fabs(ys), two_t), R.copysign(t, ys))
    re, im = R.select_pair(R.ge(xs, 0.0), right, left)
    re, im = R.mul(re, unscale), R.mul(im, unscale)
    zero = R.and_(R.eq(x, 0.0), R.eq(y, 0.0))
    re, im = R.select(zero, 0.0, re), R.select(zero, y, im)
    y_inf = R.isinf(y)
    return R.select(y_inf, _INF, re), R.select(y_inf, y, im)


def _cosh_sinh(R: _Real, y: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(cosh y, sinh y, h) for the products below: past |y| = 700 they are
    (e^|y|/2) / h and sign(y) (e^|y|/2) / h with h = e^(|y|/2) still to be multiplied in,
    so that e.g. sin(1e-310 + 800i) does not overflow to inf * 0."""
    big = R.gt(R.fabs(y), 700.0)
    h = R.math("exp", R.mul(R.fabs(y), 0.5))
    half_h = R.mul(h, 0.5)
    ch = R.select(big, half_h, R.math("cosh", y))
    sh = R.select(big, R.copysign(half_h, y), R.math("sinh", y))
    return ch, sh, R.select(big, h, 1.0)


def _sin(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """sin x cosh y + i cos x sinh y, with C99's zeros and infinities."""
    sx, cx = R.math("sin", x), R.math("cos", x)
    ch, sh, h = _cosh_sinh(R, y)
    re = R.mul(R.mul(sx, ch), h)
    im = R.mul(R.mul(cx, sh), h)
    re = R.select(R.eq(x, 0.0), x, re)
    im = R.select(R.eq(y, 0.0), R.select(R.isfinite(x), R.mul(cx, y), y), im)
    both = R.and_(R.not_(R.isfinite(x)), R.isinf(y))
    return R.select(both, _NAN, re), R.select(both, _INF, im)


def _cos(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """cos z = cosh(i z): cos x cosh y - i sin x sinh y, with C99's special values."""
    sx, cx = R.math("sin", x), R.math("cos", x)
    ch, sh, h = _cosh_sinh(R, y)
    re = R.mul(R.mul(cx, ch), h)
    im = R.neg(R.mul(R.mul(sx, sh), h))
    zero_im = R.or_(R.eq(x, 0.0), R.eq(y, 0.0))
    im = R.select(zero_im, R.neg(R.mul(R.copysign(0.0, x), R.copysign(1.0, y))), im)
    both = R.and_(R.not_(R.isfinite(x)), R.isinf(y))
    return R.select(both, _INF, re), R.select(both, _NAN, im)


def _tanh(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """Kahan's formula: with t = tan y, s = sinh x, beta = 1 + t^2,
    tanh z = (beta sqrt(1 + s^2) s + i t) / (1 + beta s^2); |x| >= 22 rounds to +-1."""
    t = R.math("tan", y)
    s = R.math("sinh", x)
    beta = R.add(1.0, R.mul(t, t))
    rho = R.sqrt(R.add(1.0, R.mul(s, s)))
    denom = R.add(1.0, R.mul(R.mul(beta, s), s))
    re = R.div(R.mul(R.mul(beta, rho), s), denom)
    im = R.div(t, denom)
    large = R.ge(R.fabs(x), 22.0)
    e = R.math("exp", R.mul(R.fabs(x), -2.0))
    im_large = R.mul(R.mul(R.mul(4.0, R.math("sin", y)), R.math("cos", y)), e)
    im_large = R.select(R.isfinite(y), im_large, R.copysign(0.0, y))
    re = R.select(large, R.copysign(1.0, x), re)
    im = R.select(large, im_large, im)
    # C99: tanh(finite + i*(inf|nan)) = nan + nan i, except that a zero real part stays
    bad = R.and_(R.isfinite(x), R.not_(R.isfinite(y)))
    re, im = R.select(bad, _NAN, re), R.select(bad, _NAN, im)
    re = R.select(R.eq(x, 0.0), x, re)
    return re, R.select(R.eq(y, 0.0), y, im)


def _sigmoid(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    e = _exp(R, R.neg(x), R.neg(y))
    return _div(R, (R.v(1.0), R.v(0.0)), (R.add(e[0], 1.0), e[1]))


def _pow(R: _Real, a: ir.Value, b: ir.Value, c: ir.Value, d: ir.Value) -> Pair:
    """exp(w log z) with NumPy's zero rules: z^0 = 1, 0^w = 0 for real w > 0, else NaN."""
    lr, li = _log(R, a, b)
    re, im = _exp(R, *_mul(R, (c, d), (lr, li)))
    z_zero = R.and_(R.eq(a, 0.0), R.eq(b, 0.0))
    positive = R.and_(R.gt(c, 0.0), R.eq(d, 0.0))
    zero_base = R.select(positive, 0.0, _NAN)
    re, im = R.select(z_zero, zero_base, re), R.select(z_zero, zero_base, im)
    w_zero = R.and_(R.eq(c, 0.0), R.eq(d, 0.0))
    return R.select(w_zero, 1.0, re), R.select(w_zero, 0.0, im)


def _reciprocal(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    return _div(R, (R.v(1.0), R.v(0.0)), (x, y))


def _rsqrt(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    return _reciprocal(R, *_sqrt(R, x, y))


def _scaled_log(factor: float):
    def log_base(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
        re, im = _log(R, x, y)
        return R.mul(re, factor), R.mul(im, factor)

    return log_base


def _exp2(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    ln2 = 0.6931471805599453
    return _exp(R, R.mul(x, ln2), R.mul(y, ln2))


def _expm1(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """e^z - 1 = expm1(x) cos y - 2 sin^2(y/2) + i e^x sin y: no cancellation near 0."""
    half = R.math("sin", R.mul(y, 0.5))
    re = R.sub(R.mul(R.math("expm1", x), R.math("cos", y)), R.mul(R.mul(half, half), 2.0))
    ex, im = _exp(R, x, y)
    far = R.or_(R.gt(x, 700.0), R.isinf(x))  # no cancellation: e^z - 1 as it stands
    re = R.select(far, R.sub(ex, 1.0), re)
    y_zero = R.eq(y, 0.0)
    return R.select(y_zero, R.math("expm1", x), re), R.select(y_zero, y, im)


def _log1p(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """log(1 + z); for |z| < 1/2, Re = log1p(x (2 + x) + y^2) / 2 avoids rounding 1 + x."""
    small = R.and_(R.lt(R.fabs(x), 0.5), R.lt(R.fabs(y), 0.5))
    t = R.add(R.mul(x, R.add(x, 2.0)), R.mul(y, y))
    re_small = R.mul(R.math("log1p", t), 0.5)
    one_x = R.add(x, 1.0)
    re, im = _log(R, one_x, y)
    return R.select(small, re_small, re), R.math("atan2", y, one_x)


def _tan(R: _Real, x: ir.Value, y: ir.Value) -> Pair:
    """tan z = -i tanh(i z)."""
    u, v = _tanh(R, R.neg(y), x)
    return v, R.neg(u)


_FUNCTIONS = {
    "exp": _exp,
    "exp2": _exp2,
    "expm1": _expm1,
    "log": _log,
    "log2": _scaled_log(1.4426950408889634),
    "log10": _scaled_log(0.4342944819032518),
    "log1p": _log1p,
    "sqrt": _sqrt,
    "rsqrt": _rsqrt,
    "sin": _sin,
    "cos": _cos,
    "tan": _tan,
    "tanh": _tanh,
    "sigmoid": _sigmoid,
    "pow": _pow,
}
