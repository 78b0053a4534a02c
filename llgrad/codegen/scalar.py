"""The scalar language of `llgrad.ir.scalar`, implemented on an llvmlite IRBuilder.

Values are `SV(value, dtype)`. float16 and bfloat16 values are held in float32 registers
and rounded back to their type after every op that produces them, so a fused chain gives
the same bits as running the ops one by one. bool is `i1` in registers and a byte in memory.
Nothing here emits a call: transcendentals come from `mathlib` as inline code, and integer
operations that are undefined behaviour in LLVM (division by zero, INT_MIN / -1,
out-of-range float-to-int casts) are guarded so generated code cannot trap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..ir import dtypes as dt
from ..ir.dtypes import DType

FLAGS = ("reassoc", "contract")   # never nnan/ninf: NaN and Inf behave as in NumPy

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def llvm_type(d: DType) -> ir.Type:
    """The register type a dtype computes in."""
    return {
        "bool": I1, "uint8": I8, "int8": I8, "int16": I16, "int32": I32, "int64": I64,
        "float16": F32, "bfloat16": F32, "float32": F32, "float64": F64,
    }[d.name]


def memory_type(d: DType) -> ir.Type:
    """The type a dtype is stored as."""
    return {
        "bool": I8, "uint8": I8, "int8": I8, "int16": I16, "int32": I32, "int64": I64,
        "float16": F16, "bfloat16": I16, "float32": F32, "float64": F64,
    }[d.name]


@dataclass(frozen=True, slots=True)
class SV:
    value: ir.Value
    dtype: DType


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Declare an intrinsic with an explicit signature (llvmlite guesses some wrong)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def _suffix(t: ir.Type) -> str:
    return {F32: "f32", F64: "f64", F16: "f16"}.get(t, str(t))


class LLVMScalar:
    def __init__(self, builder: ir.IRBuilder, index: ir.Value | None = None):
        self.b = builder
        self.module: ir.Module = builder.module
        self._index = index

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
        if a.dtype is dt.bool_:
            return SV(self.b.or_(a.value, b.value), a.dtype)
        return self._arith("fadd", "add", a, b)

    def sub(self, a: SV, b: SV) -> SV:
        return self._arith("fsub", "sub", a, b)

    def mul(self, a: SV, b: SV) -> SV:
        if a.dtype is dt.bool_:
            return SV(self.b.and_(a.value, b.value), a.dtype)
        return self._arith("fmul", "mul", a, b)

    def div(self, a: SV, b: SV) -> SV:
        if not a.dtype.is_floating_point:
            raise TypeError(f"div: true division needs floats, got {a.dtype.name}")
        return self._fix(self.b.fdiv(a.value, b.value, flags=FLAGS), a.dtype)

    def neg(self, a: SV) -> SV:
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

    def floordiv(self, a: SV, b: SV) -> SV:
        d = a.dtype
        bd = self.b
        if d.is_floating_point:
            q = bd.fdiv(a.value, b.value)
            return self._fix(self._call_unary("llvm.floor", q), d)
        if d.kind == "u" or d is dt.bool_:
            t = b.value.type
            zero = bd.icmp_unsigned("==", b.value, t(0))
            q = bd.udiv(a.value, bd.select(zero, t(1), b.value))
            return SV(bd.select(zero, t(0), q), d)
        safe_b, zero, minus1 = self._safe_divisor(a, b)
        t = a.value.type
        q = bd.sdiv(a.value, safe_b)
        r = bd.srem(a.value, safe_b)
        # C division truncates; floor division rounds down when the signs differ
        adjust = bd.and_(bd.icmp_signed("!=", r, t(0)),
                         bd.icmp_signed("<", bd.xor(r, safe_b), t(0)))
        q = bd.sub(q, bd.zext(adjust, t))
        q = bd.select(minus1, bd.neg(a.value), q)
        return SV(bd.select(zero, t(0), q), d)

    def rem(self, a: SV, b: SV) -> SV:
        """Python's modulo: the result has the divisor's sign."""
        d = a.dtype
        bd = self.b
        if d.is_floating_point:
            r = bd.frem(a.value, b.value)
            fix = bd.and_(bd.fcmp_ordered("!=", r, r.type(0.0)),
                          bd.xor(bd.fcmp_ordered("<", r, r.type(0.0)),
                                 bd.fcmp_ordered("<", b.value, r.type(0.0))))
            return self._fix(bd.select(fix, bd.fadd(r, b.value), r), d)
        if d.kind == "u" or d is dt.bool_:
            t = b.value.type
            zero = bd.icmp_unsigned("==", b.value, t(0))
            r = bd.urem(a.value, bd.select(zero, t(1), b.value))
            return SV(bd.select(zero, t(0), r), d)
        safe_b, zero, minus1 = self._safe_divisor(a, b)
        t = a.value.type
        r = bd.srem(a.value, safe_b)
        fix = bd.and_(bd.icmp_signed("!=", r, t(0)),
                      bd.icmp_signed("<", bd.xor(r, safe_b), t(0)))
        r = bd.select(fix, bd.add(r, safe_b), r)
        return SV(bd.select(bd.or_(zero, minus1), t(0), r), d)

    def _minmax(self, which: str, a: SV, b: SV) -> SV:
        d = a.dtype
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

    _FCMP = {"eq": ("oeq", True), "ne": ("une", False), "lt": ("olt", True),
             "le": ("ole", True), "gt": ("ogt", True), "ge": ("oge", True)}
    _ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

    def cmp(self, pred: str, a: SV, b: SV) -> SV:
        bd = self.b
        if a.dtype.is_floating_point:
            code, ordered = self._FCMP[pred]
            fn = bd.fcmp_ordered if ordered else bd.fcmp_unordered
            return SV(fn(self._FCMP_SYMBOL[code], a.value, b.value), dt.bool_)
        fn = bd.icmp_signed if a.dtype.kind == "i" else bd.icmp_unsigned
        return SV(fn(self._ICMP[pred], a.value, b.value), dt.bool_)

    _FCMP_SYMBOL = {"oeq": "==", "une": "!=", "olt": "<", "ole": "<=", "ogt": ">",
                    "oge": ">="}

    def select(self, c: SV, a: SV, b: SV) -> SV:
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
        if not a.dtype.is_floating_point:
            return SV(I1(0), dt.bool_)
        return SV(self.b.fcmp_unordered("uno", a.value, a.value), dt.bool_)

    # -- casts ----------------------------------------------------------------------------
    def cast(self, a: SV, to: DType) -> SV:
        bd = self.b
        src, x = a.dtype, a.value
        if src is to:
            return a
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
            fn = intrinsic(self.module, f"llvm.fptosi.sat.{wide}.{_suffix(x.type)}", wide,
                           [x.type])
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

    _INTRINSIC_UNARY = {"floor": "llvm.floor", "ceil": "llvm.ceil", "round": "llvm.roundeven",
                        "trunc": "llvm.trunc", "abs": "llvm.fabs", "sqrt": "llvm.sqrt"}

    def math(self, name: str, *args: SV) -> SV:
        d = args[0].dtype
        if name == "pow" and not d.is_floating_point:
            return self._int_pow(args[0], args[1])
        if not d.is_floating_point:
            if name in ("floor", "ceil", "round", "trunc"):
                return args[0]
            raise TypeError(f"{name}: not defined for {d.name} in generated code")
        if name in self._INTRINSIC_UNARY:
            return self._fix(self._call_unary(self._INTRINSIC_UNARY[name], args[0].value), d)
        from . import mathlib
        return self._fix(mathlib.emit(self.b, name, [a.value for a in args]), d)

    def _int_pow(self, a: SV, e: SV) -> SV:
        """Binary exponentiation, unrolled over the exponent's bits (branch-free)."""
        bd = self.b
        t = a.value.type
        result, base, exp = t(1), a.value, e.value
        for _ in range(t.width - (1 if a.dtype.kind == "i" else 0)):
            bit = bd.trunc(exp, I1)
            result = bd.select(bit, bd.mul(result, base), result)
            base = bd.mul(base, base)
            exp = bd.lshr(exp, t(1))
        if a.dtype.kind == "i":
            # negative exponents: 1 for base 1, +-1 for base -1, else 0 (C semantics)
            neg = bd.icmp_signed("<", e.value, t(0))
            one = bd.icmp_signed("==", a.value, t(1))
            mone = bd.icmp_signed("==", a.value, t(-1))
            odd = bd.trunc(e.value, I1)
            negval = bd.select(one, t(1), bd.select(mone, bd.select(odd, t(-1), t(1)), t(0)))
            result = bd.select(neg, negval, result)
        return SV(result, a.dtype)
