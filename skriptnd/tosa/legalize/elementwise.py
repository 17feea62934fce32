"""Element-wise operators: math.* unary/binary/ternary/n-ary and the nn activations.

Only fp32 ``real`` and ``bool`` tensors map, and SkriptND ``int`` (64-bit) for the comparisons, SELECT and
MIN / MAX / CLAMP, as TOSA int32 (skriptnd.tosa.legalize._INT_OPS), and for ADD / SUB / MUL where a range
analysis proves that int32 cannot overflow (skriptnd.compose.int_ranges). Sequences are built so that they agree
exactly with @lower where TOSA has the primitive (comparisons, SELECT, MIN/MAX, FLOOR ...), and
within fp32 rounding where an identity is used (sqrt = 1/rsqrt, sinh via EXP, gelu ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from skriptnd.compose.ir import Operation, Tensor
from skriptnd.tosa.legalize.core import Builder, Rule, Subgraph, aligned, norm_axes, shape_of


def _rank(op: Operation) -> int:
    return len(shape_of(op.outputs[0]))


def _unary(*names: str) -> Callable[[Any], Subgraph]:
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        x = b.arg(0)
        for n in names:
            x = b.neg(x) if n == "NEGATE" else b.emit(n, x)
        return b.done(x)
    return build


def _binary(name: str, swap: bool = False, post: str | None = None, rcp_rhs: bool = False) -> Callable[[Any], Subgraph]:
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        x, y = aligned(b, 0, "ex"), aligned(b, 1, "ey")
        kinds = [t.dtype for t in op.inputs[:2]]
        if name in ("GREATER", "GREATER_EQUAL", "EQUAL") and set(kinds) == {"int", "real"}:
            # int (int32 here) with real: the int as float32, exact within the +-2**24 the rule table asks
            x, y = (b.emit("CAST", v, output_dtype="float32") if k == "int" else v for v, k in zip((x, y), kinds, strict=True))
        if swap:
            x, y = y, x
        if rcp_rhs:
            y = b.emit("RECIPROCAL", y)
        z = b.mul(x, y) if name == "MUL" else b.emit(name, x, y)
        if post:
            z = b.emit(post, z)
        return b.done(z)
    return build


def _select(op: Operation) -> Subgraph:
    b = Builder(op)
    return b.done(b.emit("SELECT", aligned(b, 0, "ec"), aligned(b, 1, "ex"), aligned(b, 2, "ey")))


def _fn(body: Callable[[Builder, str, int], str]) -> Callable[[Any], Subgraph]:
    """A unary operator built by ``body(builder, x, rank)``."""
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        return b.done(body(b, b.arg(0), _rank(op)))
    return build


def _sqr(b: Builder, x: str, r: int) -> str:
    return b.mul(x, x)


def _sign(b: Builder, x: str, r: int) -> str:
    zero = b.scalar(0.0, r)
    neg = b.emit("SELECT", b.emit("GREATER", zero, x), b.scalar(-1.0, r), zero)
    return b.emit("SELECT", b.emit("GREATER", x, zero), b.scalar(1.0, r), neg)


def _round(b: Builder, x: str, r: int) -> str:
    """Half away from zero, exactly: |x| - floor(|x|) is exact in binary floating point."""
    ax = b.emit("ABS", x)
    f = b.emit("FLOOR", ax)
    up = b.emit("GREATER_EQUAL", b.emit("SUB", ax, f), b.scalar(0.5, r))
    m = b.emit("SELECT", up, b.emit("ADD", f, b.scalar(1.0, r)), f)
    return b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.neg(m), m)


def _exp_pair(b: Builder, x: str) -> tuple[str, str]:
    return b.emit("EXP", x), b.emit("EXP", b.neg(x))


def _sinh(b: Builder, x: str, r: int) -> str:
    p, n = _exp_pair(b, x)
    return b.mul(b.emit("SUB", p, n), b.scalar(0.5, r))


def _cosh(b: Builder, x: str, r: int) -> str:
    p, n = _exp_pair(b, x)
    return b.mul(b.emit("ADD", p, n), b.scalar(0.5, r))


def _sqrt(b: Builder, x: str) -> str:
    return b.emit("RECIPROCAL", b.emit("RSQRT", x))


def _asinh(b: Builder, x: str, r: int) -> str:
    """sign(x) * log(|x| + sqrt(x^2 + 1)) (no cancellation for negative x)."""
    ax = b.emit("ABS", x)
    y = b.emit("LOG", b.emit("ADD", ax, _sqrt(b, b.emit("ADD", b.mul(x, x), b.scalar(1.0, r)))))
    return b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.neg(y), y)


def _acosh(b: Builder, x: str, r: int) -> str:
    """log(x + sqrt(x^2 - 1)) for x >= 1 (NaN below, as in @lower)."""
    nan = b.scalar(np.nan, r)
    ok = b.emit("GREATER_EQUAL", x, b.scalar(1.0, r))
    safe = b.emit("SELECT", ok, x, b.scalar(1.0, r))
    y = b.emit("LOG", b.emit("ADD", safe, _sqrt(b, b.emit("SUB", b.mul(safe, safe), b.scalar(1.0, r)))))
    return b.emit("SELECT", ok, y, nan)


def _atanh(b: Builder, x: str, r: int) -> str:
    """0.5 * log((1 + x) / (1 - x)) for |x| < 1; +-inf at +-1, NaN beyond (as in @lower)."""
    one = b.scalar(1.0, r)
    ax = b.emit("ABS", x)
    inside = b.emit("GREATER", one, ax)
    safe = b.emit("SELECT", inside, x, b.scalar(0.0, r))
    y = b.mul(b.emit("LOG", b.mul(b.emit("ADD", one, safe), b.emit("RECIPROCAL", b.emit("SUB", one, safe)))),
              b.scalar(0.5, r))
    edge = b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.scalar(-np.inf, r), b.scalar(np.inf, r))
    beyond = b.emit("SELECT", b.emit("EQUAL", ax, one), edge, b.scalar(np.nan, r))
    return b.emit("SELECT", inside, y, beyond)


def _pow_values(b: Builder, x: str, y: str, r: int) -> str:
    """numpy's power on fp32 for finite operands: TOSA POW only defines x > 0 (or x == 0, y > 0),
    so |x| (with 0 replaced by 1) goes to POW and zero/negative bases are fixed up with SELECT:
    0**y = 0 (y > 0), 1 (y == 0), inf (y < 0); (-a)**y = +-a**y for integral y, NaN otherwise."""
    zero, one = b.scalar(0.0, r), b.scalar(1.0, r)
    ax = b.emit("ABS", x)
    is0 = b.emit("EQUAL", ax, zero)
    p = b.emit("POW", b.emit("SELECT", is0, one, ax), y)
    at0 = b.emit("SELECT", b.emit("GREATER", y, zero), zero,
                 b.emit("SELECT", b.emit("EQUAL", y, zero), one, b.scalar(np.inf, r)))
    fy = b.emit("FLOOR", y)
    integral = b.emit("EQUAL", fy, y)
    half = b.mul(y, b.scalar(0.5, r))
    odd = b.emit("LOGICAL_NOT", b.emit("EQUAL", b.emit("FLOOR", half), half))
    neg = b.emit("SELECT", integral, b.emit("SELECT", odd, b.neg(p), p), b.scalar(np.nan, r))
    pos = b.emit("SELECT", b.emit("GREATER", zero, x), neg, p)
    return b.emit("SELECT", is0, at0, pos)


def _pow(op: Operation) -> Subgraph:
    b = Builder(op)
    return b.done(_pow_values(b, aligned(b, 0, "ex"), aligned(b, 1, "ey"), _rank(op)))


#: exponents whose power is a product of the base: x ** 2 = x * x, x ** 3 = x * x * x
_POW_PRODUCTS = {2.0: 2, 3.0: 3}


def _pow_product_check(op: Operation) -> str | None:
    x = op.inputs[0]
    if not isinstance(x, Tensor) or x.dtype != "real":
        return "x is not a real tensor"
    e = _constant_bound(op.inputs[1])
    if e is None or e not in _POW_PRODUCTS:
        return "y is not a one-element constant 2 or 3"
    return None


def _pow_product(op: Operation) -> Subgraph:
    """A constant exponent 2 or 3 (GELU's x^3, a variance's or RMS norm's x^2): products of the base, exact but
    for each product's float32 rounding (numpy's powf rounds once: a few ulp apart), and every sign, zero,
    infinity and NaN as numpy's power gives them. The general form is ~10 TOSA operators (POW of |x|,
    SELECTs for zero and negative bases): GPT-2's two GELUs took a sixth of its numpy run (sknd run --profile)."""
    b = Builder(op)
    x = aligned(b, 0, "ex")
    e = _constant_bound(op.inputs[1])
    y = b.mul(x, x)
    for _ in range(_POW_PRODUCTS[e] - 2):  # type: ignore[index]
        y = b.mul(y, x)
    return b.done(y)


def _mod(op: Operation) -> Subgraph:
    """Floored modulo (numpy's mod): r = x - y * floor(x / y), then moved into [0, y) or (y, 0]."""
    b = Builder(op)
    rank = _rank(op)
    x, y = aligned(b, 0, "ex"), aligned(b, 1, "ey")
    zero = b.scalar(0.0, rank)
    q = b.emit("FLOOR", b.mul(x, b.emit("RECIPROCAL", y)))
    rem = b.emit("SUB", x, b.mul(y, q))
    wrong_sign = b.emit("GREATER", zero, b.mul(rem, y))
    rem = b.emit("SELECT", wrong_sign, b.emit("ADD", rem, y), rem)
    too_big = b.emit("GREATER_EQUAL", b.emit("ABS", rem), b.emit("ABS", y))
    rem = b.emit("SELECT", too_big, b.emit("SUB", rem, y), rem)
    nan = b.scalar(np.nan, rank)
    return b.done(b.emit("SELECT", b.emit("EQUAL", y, zero), nan, rem))


def _clamp(op: Operation) -> Subgraph:
    """@lower: x < a ? a : x > b ? b : x (a > b gives a or b as written; not MIN(MAX))."""
    b = Builder(op)
    x, lo, hi = aligned(b, 0, "ex"), aligned(b, 1, "ea"), aligned(b, 2, "eb")
    inner = b.emit("SELECT", b.emit("GREATER", x, hi), hi, x)
    return b.done(b.emit("SELECT", b.emit("GREATER", lo, x), lo, inner))


def _constant_bound(v: object) -> float | None:
    """A clamp bound that is a one-element real constant (not NaN), as a float; else None."""
    if not isinstance(v, Tensor) or v.kind != "constant" or v.value is None:
        return None
    a = np.asarray(v.value)
    if a.size != 1 or a.dtype.kind != "f" or np.isnan(a.flat[0]):
        return None
    return float(a.flat[0])


def _clamp_constant_check(op: Operation) -> str | None:
    x = op.inputs[0]
    if not isinstance(x, Tensor) or x.dtype != "real":
        return "x is not a real tensor"
    lo, hi = _constant_bound(op.inputs[1]), _constant_bound(op.inputs[2])
    if lo is None or hi is None:
        return "a bound is not a one-element real constant"
    return None if lo <= hi else "a > b"


def _clamp_constant(op: Operation) -> Subgraph:
    """Constant bounds a <= b: one CLAMP, the same bits as @lower's two SELECTs (TOSA's max and min return
    their first operand on ties, so x = a or b, and -0 against +0, give x; NaN propagates as @lower's x does).
    MobileNetV3's hardswish clamps took 45 % of its run as GREATER + SELECT pairs (sknd run --profile)."""
    b = Builder(op)
    x = aligned(b, 0, "ex")
    lo, hi = _constant_bound(op.inputs[1]), _constant_bound(op.inputs[2])
    return b.done(b.emit("CLAMP", x, min_val=lo, max_val=hi, nan_mode="PROPAGATE"))


def _axpb(op: Operation) -> Subgraph:
    b = Builder(op)
    a, x, c = aligned(b, 0, "ea"), aligned(b, 1, "ex"), aligned(b, 2, "eb")
    return b.done(b.emit("ADD", b.mul(a, x), c))


def _axpby(op: Operation) -> Subgraph:
    b = Builder(op)
    a, x, c, y = aligned(b, 0, "ea"), aligned(b, 1, "ex"), aligned(b, 2, "eb"), aligned(b, 3, "ey")
    return b.done(b.emit("ADD", b.mul(a, x), b.mul(c, y)))


def _nary(name: str) -> Callable[[Any], Subgraph]:
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        xs = b.arg(0)
        y = xs[0]
        for x in xs[1:]:
            y = b.mul(y, x) if name == "MUL" else b.emit(name, y, x)
        return b.done(y)
    return build


def _arg_n(greater: bool) -> Callable[[Any], Subgraph]:
    """@lower: y = 0, then y := k where xs[k] beats xs[y] strictly (the first extremum wins)."""
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        xs, rank = b.arg(0), _rank(op)
        best, idx = xs[0], b.const(np.zeros([1] * rank), np.int32)
        for k, x in enumerate(xs[1:], start=1):
            upd = b.emit("GREATER", x, best) if greater else b.emit("GREATER", best, x)
            idx = b.emit("SELECT", upd, b.const(np.full([1] * rank, k), np.int32), idx)
            best = b.emit("SELECT", upd, x, best)
        if len(xs) == 1 and rank == 0:
            idx = b.const(np.zeros([]), np.int32)
        elif len(xs) == 1:  # the constant index 0, tiled to the output shape
            idx = b.emit("TILE", idx, b.shape(shape_of(op.outputs[0])))
        return b.done(idx, ints=[True])
    return build


# -- nn activations ------------------------------------------------------------------------------


def gt_select(b: Builder, x: str, y: str) -> str:
    """``x >? y``, defined by the spec as ``x > y ? x : y`` (so a NaN ``x`` gives ``y``)."""
    return b.emit("SELECT", b.emit("GREATER", x, y), x, y)


def lt_select(b: Builder, x: str, y: str) -> str:
    """``x <? y`` = ``x < y ? x : y``."""
    return b.emit("SELECT", b.emit("GREATER", y, x), x, y)


def _minmax(greater: bool) -> Callable[[Any], Subgraph]:
    def build(op: Operation) -> Subgraph:
        b = Builder(op)
        x, y = aligned(b, 0, "ex"), aligned(b, 1, "ey")
        return b.done(gt_select(b, x, y) if greater else lt_select(b, x, y))
    return build


def _relu(op: Operation) -> Subgraph:
    """@lower: (x <? max ?? x) >? (alpha * x ?? 0.0). Without alpha: CLAMP(0, max) with nan_mode IGNORE
    (NaN -> 0 = x >? 0); with max, a NaN becomes max (NaN <? max = max): SELECT on EQUAL(x, x)."""
    b = Builder(op)
    x, r = b.arg(0), _rank(op)
    alpha, mx = op.attribs.get("alpha"), op.attribs.get("max")
    if alpha is None:
        y = b.emit("CLAMP", x, min_val=0.0, max_val=float("inf") if mx is None else float(mx), nan_mode="IGNORE")
        if mx is not None:
            y = b.emit("SELECT", b.emit("EQUAL", x, x), y, b.scalar(mx, r))
        return b.done(y)
    t = x if mx is None else lt_select(b, x, b.scalar(mx, r))
    return b.done(gt_select(b, t, b.mul(x, b.scalar(alpha, r))))


def _prelu(op: Operation) -> Subgraph:
    b = Builder(op)
    x, r = b.arg(0), _rank(op)
    axis = norm_axes(op.attribs.get("axis", 1), r)[0]
    shape = [1] * r
    shape[axis] = shape_of(op.inputs[1])[0]
    alpha = b.reshape(b.arg(1), shape_of(op.inputs[1]), shape)
    return b.done(b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.mul(alpha, x), x))


def _thresholded_relu(b: Builder, x: str, r: int) -> str:
    theta = float(b.op.attribs.get("theta", 0.0))
    return b.emit("SELECT", b.emit("GREATER", x, b.scalar(theta, r)), x, b.scalar(0.0, r))


def _elu_values(b: Builder, x: str, r: int, alpha: float) -> str:
    em1 = b.emit("SUB", b.emit("EXP", x), b.scalar(1.0, r))
    return b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.mul(b.scalar(alpha, r), em1), x)


def _elu(b: Builder, x: str, r: int) -> str:
    return _elu_values(b, x, r, float(b.op.attribs.get("alpha", 1.0)))


def _selu(b: Builder, x: str, r: int) -> str:
    a = b.op.attribs
    return b.mul(b.scalar(float(a.get("lambda", 1.05070102)), r), _elu_values(b, x, r, float(a.get("alpha", 1.67326319))))


def _gelu(b: Builder, x: str, r: int) -> str:
    approx = b.op.attribs.get("approximate")
    one, half = b.scalar(1.0, r), b.scalar(0.5, r)
    if approx == "SIGMOID":
        return b.mul(x, b.emit("RECIPROCAL", b.emit("ADD", one, b.emit("EXP", b.mul(x, b.scalar(-1.702, r))))))
    if approx == "TANH":
        cube = b.mul(b.mul(x, x), x)
        inner = b.mul(b.scalar(math.sqrt(2.0 / math.pi), r), b.emit("ADD", x, b.mul(b.scalar(0.044715, r), cube)))
        return b.mul(b.mul(half, x), b.emit("ADD", one, b.emit("TANH", inner)))
    e = b.emit("ERF", b.mul(x, b.scalar(1.0 / math.sqrt(2.0), r)))
    return b.mul(b.mul(half, x), b.emit("ADD", one, e))


def _softplus(b: Builder, x: str, r: int) -> str:
    return b.emit("LOG", b.emit("ADD", b.emit("EXP", x), b.scalar(1.0, r)))


def _silu(b: Builder, x: str, r: int) -> str:
    return b.mul(x, b.emit("SIGMOID", x))


def _log2(b: Builder, x: str, r: int) -> str:
    return b.mul(b.emit("LOG", x), b.scalar(1.0 / math.log(2.0), r))


def _tan(b: Builder, x: str, r: int) -> str:
    return b.mul(b.emit("SIN", x), b.emit("RECIPROCAL", b.emit("COS", x)))


def _atan_values(b: Builder, x: str, r: int) -> str:
    """atan as Cephes' atanf: reduce |x| to [0, tan(pi/8)] (x > tan(3pi/8): pi/2 + atan(-1/x);
    x > tan(pi/8): pi/4 + atan((x-1)/(x+1))), an odd polynomial of degree 9 (~1e-7 relative), sign."""
    ax = b.emit("ABS", x)
    one = b.scalar(1.0, r)
    big = b.emit("GREATER", ax, b.scalar(2.414213562373095, r))
    mid = b.emit("GREATER", ax, b.scalar(0.4142135623730950, r))
    t_big = b.neg(b.emit("RECIPROCAL", ax))
    t_mid = b.mul(b.emit("SUB", ax, one), b.emit("RECIPROCAL", b.emit("ADD", ax, one)))
    t = b.emit("SELECT", big, t_big, b.emit("SELECT", mid, t_mid, ax))
    y0 = b.emit("SELECT", big, b.scalar(math.pi / 2, r), b.emit("SELECT", mid, b.scalar(math.pi / 4, r),
                                                                      b.scalar(0.0, r)))
    z = b.mul(t, t)
    p = b.scalar(8.05374449538e-2, r)
    for coeff in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
        p = b.emit("ADD", b.mul(p, z), b.scalar(coeff, r))
    y = b.emit("ADD", b.mul(b.mul(p, z), t), t)
    y = b.emit("ADD", y0, y)
    return b.emit("SELECT", b.emit("GREATER", b.scalar(0.0, r), x), b.neg(y), y)


def _atan(b: Builder, x: str, r: int) -> str:
    return _atan_values(b, x, r)


def _asin(b: Builder, x: str, r: int) -> str:
    """atan(x / sqrt((1 - x)(1 + x))) (+-pi/2 at +-1 through atan(+-inf)); NaN for |x| > 1."""
    one = b.scalar(1.0, r)
    q = b.mul(b.emit("SUB", one, x), b.emit("ADD", one, x))
    y = _atan_values(b, b.mul(x, b.emit("RSQRT", b.emit("MAXIMUM", q, b.scalar(0.0, r)))), r)
    return b.emit("SELECT", b.emit("GREATER", b.emit("ABS", x), one), b.scalar(np.nan, r), y)


def _acos(b: Builder, x: str, r: int) -> str:
    """2 atan(sqrt((1 - x) / (1 + x))) (no cancellation near 1; pi at -1); NaN for |x| > 1."""
    one = b.scalar(1.0, r)
    q = b.mul(b.emit("SUB", one, x), b.emit("RECIPROCAL", b.emit("ADD", one, x)))
    root = b.emit("RECIPROCAL", b.emit("RSQRT", b.emit("MAXIMUM", q, b.scalar(0.0, r))))
    y = b.mul(b.scalar(2.0, r), _atan_values(b, root, r))
    return b.emit("SELECT", b.emit("GREATER", b.emit("ABS", x), one), b.scalar(np.nan, r), y)


CMP = {"math.lt": ("GREATER", True, None), "math.gt": ("GREATER", False, None),
       "math.le": ("GREATER_EQUAL", True, None), "math.ge": ("GREATER_EQUAL", False, None),
       "math.eq": ("EQUAL", False, None), "math.ne": ("EQUAL", False, "LOGICAL_NOT")}

_ALIGN = "(+ RESHAPE for lhs/rhs_align)"

RULES: dict[str, list[Rule]] = {
    "math.add": [Rule(f"ADD {_ALIGN}", _binary("ADD"))],
    "math.sub": [Rule(f"SUB {_ALIGN}", _binary("SUB"))],
    "math.mul": [Rule(f"MUL shift=0 {_ALIGN}", _binary("MUL"))],
    "math.div": [Rule(f"MUL(x, RECIPROCAL(y)) {_ALIGN}", _binary("MUL", rcp_rhs=True))],
    "math.min": [Rule(f"x <? y = SELECT(GREATER(y, x), x, y) (the spec's definition, also for NaN) {_ALIGN}",
                      _minmax(False))],
    "math.max": [Rule(f"x >? y = SELECT(GREATER(x, y), x, y) (the spec's definition, also for NaN) {_ALIGN}",
                      _minmax(True))],
    "math.pow": [Rule("one-element constant y = 2 or 3: MULs of x", _pow_product, _pow_product_check),
                 Rule("POW(|x| or 1, y), SELECTs for zero and negative bases (integral y: sign by parity, "
                      "else NaN) as numpy's power", _pow)],
    "math.mod": [Rule("floored modulo: x - y*FLOOR(x*RECIPROCAL(y)), SELECT-corrected into y's sign and range, "
                      "NaN for y == 0", _mod)],
    **{k: [Rule(f"{'LOGICAL_NOT(' if post else ''}{n}({'y, x' if sw else 'x, y'}){')' if post else ''} {_ALIGN}",
                _binary(n, swap=sw, post=post))] for k, (n, sw, post) in CMP.items()},
    "math.and": [Rule("LOGICAL_AND", _binary("LOGICAL_AND"))],
    "math.or": [Rule("LOGICAL_OR", _binary("LOGICAL_OR"))],
    "math.xor": [Rule("LOGICAL_XOR", _binary("LOGICAL_XOR"))],
    "math.not": [Rule("LOGICAL_NOT", _unary("LOGICAL_NOT"))],
    "math.select": [Rule(f"SELECT {_ALIGN}", _select)],
    "math.clamp": [Rule("constant one-element bounds a <= b: CLAMP(nan_mode=PROPAGATE)", _clamp_constant,
                        _clamp_constant_check),
                   Rule("SELECT(GREATER(a, x), a, SELECT(GREATER(x, b), b, x)) (as @lower, also when a > b)",
                        _clamp)],
    "math.axpb": [Rule("ADD(MUL(a, x), b)", _axpb)],
    "math.axpby": [Rule("ADD(MUL(a, x), MUL(b, y))", _axpby)],
    "math.sum_n": [Rule("chain of ADD", _nary("ADD"))],
    "math.prod_n": [Rule("chain of MUL", _nary("MUL"))],
    "math.min_n": [Rule("chain of MINIMUM", _nary("MINIMUM"))],
    "math.max_n": [Rule("chain of MAXIMUM", _nary("MAXIMUM"))],
    "math.any_n": [Rule("chain of LOGICAL_OR", _nary("LOGICAL_OR"))],
    "math.all_n": [Rule("chain of LOGICAL_AND", _nary("LOGICAL_AND"))],
    "math.argmax_n": [Rule("running GREATER/SELECT of value and int32 index (first maximum wins)", _arg_n(True))],
    "math.argmin_n": [Rule("running GREATER/SELECT of value and int32 index (first minimum wins)", _arg_n(False))],
    "math.iden": [Rule("IDENTITY", _unary("IDENTITY"))],
    "math.neg": [Rule("NEGATE (zero points 0)", _unary("NEGATE"))],
    "math.abs": [Rule("ABS", _unary("ABS"))],
    "math.sign": [Rule("SELECT(GREATER(x, 0), 1, SELECT(GREATER(0, x), -1, 0))", _fn(_sign))],
    "math.exp": [Rule("EXP", _unary("EXP"))],
    "math.log": [Rule("LOG", _unary("LOG"))],
    "math.log2": [Rule("MUL(LOG(x), 1/ln 2)", _fn(_log2))],
    "math.sqr": [Rule("MUL(x, x)", _fn(_sqr))],
    "math.sqrt": [Rule("RECIPROCAL(RSQRT(x))", _unary("RSQRT", "RECIPROCAL"))],
    "math.rsqr": [Rule("RECIPROCAL(MUL(x, x))", _fn(lambda b, x, r: b.emit("RECIPROCAL", b.mul(x, x))))],
    "math.rsqrt": [Rule("RSQRT", _unary("RSQRT"))],
    "math.rcp": [Rule("RECIPROCAL", _unary("RECIPROCAL"))],
    "math.floor": [Rule("FLOOR", _unary("FLOOR"))],
    "math.ceil": [Rule("CEIL", _unary("CEIL"))],
    "math.round": [Rule("half away from zero, exactly: f = FLOOR(ABS(x)); SELECT(ABS(x) - f >= 0.5, f + 1, f) "
                        "with x's sign (TOSA has no ROUND)", _fn(_round))],
    "math.sin": [Rule("SIN", _unary("SIN"))],
    "math.cos": [Rule("COS", _unary("COS"))],
    "math.tan": [Rule("MUL(SIN(x), RECIPROCAL(COS(x)))", _fn(_tan))],
    "math.sinh": [Rule("(EXP(x) - EXP(-x)) / 2", _fn(_sinh))],
    "math.cosh": [Rule("(EXP(x) + EXP(-x)) / 2", _fn(_cosh))],
    "math.tanh": [Rule("TANH", _unary("TANH"))],
    "math.asinh": [Rule("sign(x) * LOG(|x| + sqrt(x*x + 1))", _fn(_asinh))],
    "math.acosh": [Rule("LOG(x + sqrt(x*x - 1)) for x >= 1, NaN below", _fn(_acosh))],
    "math.atanh": [Rule("LOG((1 + x) / (1 - x)) / 2 for |x| < 1, +-inf at +-1, NaN beyond", _fn(_atanh))],
    "math.atan": [Rule("Cephes atanf: range reduction by SELECT, odd degree-9 polynomial (~1e-7 relative; TOSA "
                       "has no arctangent)", _fn(_atan))],
    "math.asin": [Rule("atan(x * RSQRT((1 - x)(1 + x))), NaN for |x| > 1", _fn(_asin))],
    "math.acos": [Rule("2 atan(sqrt((1 - x) / (1 + x))), NaN for |x| > 1", _fn(_acos))],
    "nn.sigmoid": [Rule("SIGMOID", _unary("SIGMOID"))],
    "nn.erf": [Rule("ERF", _unary("ERF"))],
    "nn.silu": [Rule("MUL(x, SIGMOID(x))", _fn(_silu))],
    "nn.relu": [Rule("alpha=null: CLAMP(0, max ?? inf, nan_mode=IGNORE) (+ SELECT NaN -> max); else "
                     "(x <? max) >? MUL(x, alpha) as SELECT/GREATER", _relu)],
    "nn.prelu": [Rule("SELECT(GREATER(0, x), MUL(RESHAPE(alpha), x), x)", _prelu)],
    "nn.thresholded_relu": [Rule("SELECT(GREATER(x, theta), x, 0)", _fn(_thresholded_relu))],
    "nn.elu": [Rule("SELECT(GREATER(0, x), alpha * (EXP(x) - 1), x)", _fn(_elu))],
    "nn.selu": [Rule("lambda * SELECT(GREATER(0, x), alpha * (EXP(x) - 1), x)", _fn(_selu))],
    "nn.gelu": [Rule("0.5*x*(1 + ERF(x/sqrt 2)); TANH / SIGMOID approximations as written in @lower", _fn(_gelu))],
    "nn.softplus": [Rule("LOG(EXP(x) + 1)", _fn(_softplus))],
}

NOT_LEGALIZABLE: dict[str, str] = {}
