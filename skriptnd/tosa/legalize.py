"""Table-driven legalization of standard-library operations to TOSA 1.0 subgraphs (fp32).

``TABLE`` maps a stdlib operator name to :class:`Rule` s; a rule's ``check`` returns ``None`` when it
applies to an :class:`~skriptnd.compose.ir.Operation` (or the reason why not), its ``build`` emits the
TOSA subgraph. :func:`legalize` returns ``(Subgraph, description)`` or ``(None, reason)`` (the
operation falls back to its @lower block); :func:`run_subgraph` interprets a subgraph with
:data:`skriptnd.tosa.OPS`; :func:`coverage` reports a composed graph.

Shapes come from the operation's binding (``op.binding.env``: the stdlib's @using symbols such as the
broadcast shapes ``ex``/``ey`` or conv's ``offset``/``paddings``), so every subgraph is static.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import OPS

F32 = np.float32


@dataclass
class TosaOp:
    """One TOSA operator application: ``output = name(*inputs, **attrs)``; inputs name values."""

    name: str
    inputs: list[str]
    attrs: dict[str, Any]
    output: str


@dataclass
class Subgraph:
    """``inputs``: value names in the operation's input order (a pack: a list of names; an omitted
    optional input: ``None``); ``constants``: named arrays (TOSA CONST / CONST_SHAPE)."""

    inputs: list[Any]
    outputs: list[str]
    ops: list[TosaOp] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{o.output} = {o.name}({', '.join(o.inputs)}){o.attrs or ''}" for o in self.ops]
        return "\n".join(lines)


def run_subgraph(sg: Subgraph, args: Sequence[Any]) -> list[np.ndarray]:
    """Run ``sg`` on numpy ``args`` (the operation's inputs); one array per output."""
    env: dict[str, Any] = dict(sg.constants)
    for name, arg in zip(sg.inputs, args, strict=True):
        if isinstance(name, list):
            env.update(zip(name, arg, strict=True))
        elif name is not None:
            env[name] = arg
    for o in sg.ops:
        operands = [env[i] for i in o.inputs]
        if o.name == "CONCAT":
            env[o.output] = OPS[o.name](operands, **o.attrs)
        else:
            env[o.output] = OPS[o.name](*operands, **o.attrs)
    return [env[n] for n in sg.outputs]


class _Builder:
    def __init__(self, op: Any):
        self.op = op
        self.env = op.binding.env if op.binding is not None else {}
        self.sg = Subgraph(inputs=[], outputs=[])
        self._n = 0
        for i, v in enumerate(op.inputs):
            if isinstance(v, list):
                self.sg.inputs.append([f"in{i}_{j}" for j in range(len(v))])
            else:
                self.sg.inputs.append(None if v is None else f"in{i}")

    def arg(self, i: int) -> Any:
        return self.sg.inputs[i] if i < len(self.sg.inputs) else None

    def const(self, value: Any, dtype: Any = F32) -> str:
        name = f"c{len(self.sg.constants)}"
        self.sg.constants[name] = np.asarray(value, dtype=dtype)
        return name

    def shape(self, dims: Sequence[int]) -> str:
        return self.const([int(d) for d in dims], np.int64)

    def emit(self, name: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        out = f"t{self._n}"
        self.sg.ops.append(TosaOp(name, list(inputs), attrs, out))
        return out

    def reshape(self, x: str, from_shape: Sequence[int], to_shape: Sequence[int]) -> str:
        if tuple(from_shape) == tuple(to_shape):
            return x
        return self.emit("RESHAPE", x, self.shape(to_shape))

    def transpose(self, x: str, perms: Sequence[int]) -> str:
        if list(perms) == list(range(len(perms))):
            return x
        return self.emit("TRANSPOSE", x, perms=[int(p) for p in perms])

    def done(self, *outputs: str) -> Subgraph:
        outs = []
        for o in outputs:
            if o in self.sg.constants or any(o == n or (isinstance(n, list) and o in n) for n in self.sg.inputs):
                o = self.emit("IDENTITY", o)
            outs.append(o)
        self.sg.outputs = outs
        return self.sg


@dataclass
class Rule:
    """``check(op)``: None if the rule applies, else why not; ``build(op)``: the subgraph."""

    description: str
    build: Callable[[Any], Subgraph]
    check: Callable[[Any], str | None] = lambda op: None


# -- helpers -------------------------------------------------------------------------------------


def _ints(v: Any) -> list[int]:
    if v is None:
        return []
    if isinstance(v, int | np.integer):
        return [int(v)]
    return [int(x) for x in v]


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


def _env(op: Any, name: str) -> Any:
    return op.binding.env[name]


def _norm_axes(axes: Any, rank: int) -> list[int]:
    return [a + rank if a < 0 else a for a in _ints(axes)]


# -- element-wise --------------------------------------------------------------------------------


def _unary(*names: str) -> Callable[[Any], Subgraph]:
    def build(op: Any) -> Subgraph:
        b = _Builder(op)
        x = b.arg(0)
        for n in names:
            if n == "NEGATE":
                x = b.emit(n, x, b.const([0.0]), b.const([0.0]))
            else:
                x = b.emit(n, x)
        return b.done(x)
    return build


def _aligned(b: _Builder, i: int, expanded: str) -> str:
    return b.reshape(b.arg(i), _shape(b.op.inputs[i]), _ints(b.env[expanded]))


def _binary(name: str, swap: bool = False, post: str | None = None, rcp_rhs: bool = False) -> Callable[[Any], Subgraph]:
    def build(op: Any) -> Subgraph:
        b = _Builder(op)
        x, y = _aligned(b, 0, "ex"), _aligned(b, 1, "ey")
        if swap:
            x, y = y, x
        if rcp_rhs:
            y = b.emit("RECIPROCAL", y)
        z = b.emit(name, x, y, b.const([0], np.int8)) if name == "MUL" else b.emit(name, x, y)
        if post:
            z = b.emit(post, z)
        return b.done(z)
    return build


def _select(op: Any) -> Subgraph:
    b = _Builder(op)
    return b.done(b.emit("SELECT", _aligned(b, 0, "ec"), _aligned(b, 1, "ex"), _aligned(b, 2, "ey")))


def _relu(op: Any) -> Subgraph:
    b = _Builder(op)
    x = b.arg(0)
    alpha, mx = op.attribs.get("alpha"), op.attribs.get("max")
    ones = [1] * len(_shape(op.inputs[0]))
    if alpha is None:
        return b.done(b.emit("CLAMP", x, min_val=0.0, max_val=float("inf") if mx is None else float(mx)))
    t = x if mx is None else b.emit("MINIMUM", x, b.const(np.full(ones, mx)))
    ax = b.emit("MUL", x, b.const(np.full(ones, alpha)), b.const([0], np.int8))
    return b.done(b.emit("MAXIMUM", t, ax))


def _silu(op: Any) -> Subgraph:
    b = _Builder(op)
    x = b.arg(0)
    return b.done(b.emit("MUL", x, b.emit("SIGMOID", x), b.const([0], np.int8)))


# -- reductions ----------------------------------------------------------------------------------


def _reduce(name: str, mean: bool = False) -> Callable[[Any], Subgraph]:
    def build(op: Any) -> Subgraph:
        b = _Builder(op)
        shape = _shape(op.inputs[0])
        mask = list(_env(op, "axes_mask"))
        x = b.arg(0)
        count = 1
        kept = list(shape)
        for axis, m in enumerate(mask):
            if m:
                x = b.emit(name, x, axis=axis)
                count *= shape[axis]
                kept[axis] = 1
        if mean:
            x = b.emit("MUL", x, b.const(np.full([1] * len(shape), 1.0 / count)), b.const([0], np.int8))
        x = b.reshape(x, kept, _shape(op.outputs[0]))
        return b.done(x)
    return build


def _softmax(op: Any) -> Subgraph:
    b = _Builder(op)
    x = b.arg(0)
    axes = sorted(set(_norm_axes(op.attribs["axes"], len(_shape(op.inputs[0])))))
    m = x
    for a in axes:
        m = b.emit("REDUCE_MAX", m, axis=a)
    e = b.emit("EXP", b.emit("SUB", x, m))
    s = e
    for a in axes:
        s = b.emit("REDUCE_SUM", s, axis=a)
    return b.done(b.emit("MUL", e, b.emit("RECIPROCAL", s), b.const([0], np.int8)))


# -- data layout ---------------------------------------------------------------------------------


def _to_output_shape(op: Any) -> Subgraph:
    b = _Builder(op)
    return b.done(b.reshape(b.arg(0), _shape(op.inputs[0]), _shape(op.outputs[0])))


def _transpose(op: Any) -> Subgraph:
    b = _Builder(op)
    axis = int(_env(op, "_axis"))
    perms = list(range(axis)) + _ints(_env(op, "_perm"))
    return b.done(b.transpose(b.arg(0), perms))


def _concat(op: Any) -> Subgraph:
    b = _Builder(op)
    rank = len(_shape(op.outputs[0]))
    axis = int(op.attribs["axis"])
    return b.done(b.emit("CONCAT", *b.arg(0), axis=axis + rank if axis < 0 else axis))


def _slice_check(op: Any) -> str | None:
    if any(s != 1 for s in _ints(op.attribs.get("stride"))):
        return "slice with stride != 1 (TOSA SLICE has no stride)"
    return None


def _slice(op: Any) -> Subgraph:
    b = _Builder(op)
    rank = len(_shape(op.inputs[0]))
    start = [0] * rank
    for a, s in zip(_norm_axes(op.attribs["axes"], rank), _ints(op.attribs["begin"]), strict=True):
        start[a] = s
    return b.done(b.emit("SLICE", b.arg(0), b.shape(start), b.shape(_shape(op.outputs[0]))))


def _pad_check(op: Any) -> str | None:
    method = op.attribs.get("method", "CONSTANT")
    return None if method == "CONSTANT" else f"pad method {method!r} (TOSA PAD is constant only)"


def _pad(op: Any) -> Subgraph:
    b = _Builder(op)
    before, after = _ints(_env(op, "before")), _ints(_env(op, "after"))
    padding = [p for pair in zip(before, after, strict=True) for p in pair]
    value = b.arg(1)
    pad_const = b.const([0.0]) if value is None else b.reshape(value, (), (1,))
    return b.done(b.emit("PAD", b.arg(0), b.shape(padding), pad_const))


def _tile(op: Any) -> Subgraph:
    b = _Builder(op)
    rank = len(_shape(op.inputs[0]))
    multiples = [1] * rank
    for a, r in zip(_norm_axes(op.attribs["axes"], rank), _ints(op.attribs["repeats"]), strict=True):
        multiples[a] = r
    return b.done(b.emit("TILE", b.arg(0), b.shape(multiples)))


# -- linear algebra ------------------------------------------------------------------------------


def _batched(b: _Builder, i: int, expanded: Sequence[int], z: Sequence[int], trans: bool) -> str:
    shape = _shape(b.op.inputs[i])
    mat = list(shape[-2:])
    x = b.reshape(b.arg(i), shape, [*expanded, *mat])
    if tuple(expanded) != tuple(z):
        x = b.emit("TILE", x, b.shape([zd // ed for zd, ed in zip(z, expanded, strict=True)] + [1, 1]))
    x = b.reshape(x, [*z, *mat], [int(np.prod(z, dtype=np.int64)), *mat])
    return b.transpose(x, [0, 2, 1]) if trans else x


def _matmul(op: Any) -> Subgraph:
    b = _Builder(op)
    z = _ints(_env(op, "z"))
    a = _batched(b, 0, _ints(_env(op, "ea")), z, bool(op.attribs.get("transA")))
    bb = _batched(b, 1, _ints(_env(op, "eb")), z, bool(op.attribs.get("transB")))
    out = _shape(op.outputs[0])
    y = b.emit("MATMUL", a, bb, b.const([0.0]), b.const([0.0]))
    y = b.reshape(y, [int(np.prod(z, dtype=np.int64)), *out[-2:]], out)
    if b.arg(2) is not None:
        c = b.reshape(b.arg(2), _shape(op.inputs[2]), [*_ints(_env(op, "ec")), *out[-2:]])
        y = b.emit("ADD", y, c)
    return b.done(y)


def _linear(op: Any) -> Subgraph:
    b = _Builder(op)
    bsz, c = _shape(op.inputs[0])
    n = _shape(op.inputs[1])[0]
    x = b.reshape(b.arg(0), (bsz, c), (1, bsz, c))
    w = b.reshape(b.transpose(b.arg(1), [1, 0]), (c, n), (1, c, n))
    y = b.reshape(b.emit("MATMUL", x, w, b.const([0.0]), b.const([0.0])), (1, bsz, n), (bsz, n))
    if b.arg(2) is not None:
        y = b.emit("ADD", y, b.reshape(b.arg(2), (n,), (1, n)))
    return b.done(y)


# -- convolution and pooling ---------------------------------------------------------------------


def _geometry(sizes: Sequence[int], before: Sequence[int], extents: Sequence[int], strides: Sequence[int],
              outs: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """TOSA pads [top, bottom, left, right] and the input crop (start, size per spatial dim) giving
    exactly ``outs`` windows: TOSA requires the exact division idiv_check and non-negative pads, the
    stdlib floors or ceils and allows negative (automatic) padding."""
    pads, start, crop = [], [], []
    for size, lo, ext, stride, out in zip(sizes, before, extents, strides, outs, strict=True):
        first = max(-lo, 0)
        lo, size = max(lo, 0), size - first
        hi = (out - 1) * stride + ext - size - lo
        if hi < 0:
            size, hi = size + hi, 0
        pads += [lo, hi]
        start.append(first)
        crop.append(size)
    return pads, start, crop


def _offsets(op: Any, paddings: list[int]) -> list[int]:
    padding = op.attribs.get("padding")
    if padding is not None:
        return _ints(padding)[:len(paddings)]
    if op.attribs.get("padding_align", "UPPER") == "UPPER":
        return [p // 2 for p in paddings]
    return [-(-p // 2) for p in paddings]


def _conv_check(op: Any) -> str | None:
    if op.attribs.get("data_format", "NCX") != "NCX" or op.attribs.get("filter_format", "NCX") != "NCX":
        return "conv data/filter format other than NCX"
    if len(_shape(op.inputs[0])) != 4:
        return f"{len(_shape(op.inputs[0])) - 2}-D convolution (only 2-D maps to CONV2D)"
    g, ic, fc = int(_env(op, "g")), int(_env(op, "ic")), int(_env(op, "fc"))
    if g != 1 and not (g == ic and fc == 1):
        return f"grouped convolution (groups={g}, not 1 or depthwise)"
    shape = _shape(op.inputs[0])
    crop = _geometry(shape[2:], _offsets(op, _ints(_env(op, "paddings"))), _ints(_env(op, "fd")),
                     _pair(op.attribs.get("stride")), _shape(op.outputs[0])[2:])[2]
    if any(c <= 0 for c in crop):
        return "convolution windows that lie wholly in the padding (TOSA SLICE cannot produce an empty crop)"
    return None


def _pair(v: Any) -> list[int]:
    v = _ints(v) or [1]
    return v * 2 if len(v) == 1 else v


def _crop(b: _Builder, x: str, shape: Sequence[int], start: Sequence[int], crop: Sequence[int]) -> str:
    """Crop NHWC ``x`` (``shape``) to spatial ``start``/sizes ``crop``."""
    if tuple(shape[1:3]) == tuple(crop):
        return x
    return b.emit("SLICE", x, b.shape([0, *start, 0]), b.shape([shape[0], *crop, shape[3]]))


def _conv(op: Any) -> Subgraph:
    b = _Builder(op)
    s = _shape(op.inputs[0])
    n, fc, kh, kw = _shape(op.inputs[1])
    paddings = _ints(_env(op, "paddings"))
    stride, dilation = _pair(op.attribs.get("stride")), _pair(op.attribs.get("dilation"))
    pads, start, crop = _geometry(s[2:], _offsets(op, paddings), _ints(_env(op, "fd")), stride,
                                  _ints(_env(op, "ox")))
    x = _crop(b, b.transpose(b.arg(0), [0, 2, 3, 1]), (s[0], s[2], s[3], s[1]), start, crop)
    bias = b.const(np.zeros(1)) if b.arg(2) is None else b.arg(2)
    zps = (b.const([0.0]), b.const([0.0]))
    if int(_env(op, "g")) == 1:
        w = b.transpose(b.arg(1), [0, 2, 3, 1])
        y = b.emit("CONV2D", x, w, bias, *zps, pad=pads, stride=stride, dilation=dilation, acc_type="fp32")
    else:
        c = s[1]
        w = b.transpose(b.reshape(b.arg(1), (n, fc, kh, kw), (c, n // c, kh, kw)), [2, 3, 0, 1])
        y = b.emit("DEPTHWISE_CONV2D", x, w, bias, *zps, pad=pads, stride=stride, dilation=dilation,
                   acc_type="fp32")
    return b.done(b.transpose(y, [0, 3, 1, 2]))


def _pool_check(op: Any) -> str | None:
    shape = _shape(op.inputs[0])
    if len(shape) != 4 or _norm_axes(op.attribs["axes"], 4) != [2, 3]:
        return "pooling other than over axes [2, 3] of a rank-4 (NCHW) tensor"
    if any(d != 1 for d in _ints(op.attribs.get("dilation"))):
        return "dilated pooling (TOSA pools have no dilation)"
    paddings = _ints(_env(op, "paddings"))
    size = _pair(op.attribs["size"])
    pads, _, crop = _geometry(shape[2:], _offsets(op, paddings), size, _pair(op.attribs.get("stride")),
                              _shape(op.outputs[0])[2:])
    if any(c <= 0 for c in crop):
        return "pooling windows that lie wholly in the padding (TOSA SLICE cannot produce an empty crop)"
    if op.op == "nn.avg_pool" and op.attribs.get("ignore_border", True):
        if any(p >= k for p, k in zip(pads, [size[0], size[0], size[1], size[1]], strict=True)):
            return "avg_pool padding >= window size (TOSA AVG_POOL2D requires pad < kernel)"
    return None


def _pool(op: Any) -> Subgraph:
    b = _Builder(op)
    s = _shape(op.inputs[0])
    paddings = _ints(_env(op, "paddings"))
    size, stride = _pair(op.attribs["size"]), _pair(op.attribs.get("stride"))
    pads, start, crop = _geometry(s[2:], _offsets(op, paddings), size, stride, _shape(op.outputs[0])[2:])
    x = _crop(b, b.transpose(b.arg(0), [0, 2, 3, 1]), (s[0], s[2], s[3], s[1]), start, crop)
    kernel4 = [size[0], size[0], size[1], size[1]]
    explicit = any(p >= k for p, k in zip(pads, kernel4, strict=True))
    if op.op == "nn.max_pool":
        if explicit:  # padding never contributes: pad with -inf, then pool without padding
            x = b.emit("PAD", x, b.shape([0, 0, *pads, 0, 0]), b.const([-np.inf]))
            pads = [0, 0, 0, 0]
        y = b.emit("MAX_POOL2D", x, kernel=size, stride=stride, pad=pads)
    else:
        if not op.attribs.get("ignore_border", True) and any(pads):  # divide by the full window size
            x = b.emit("PAD", x, b.shape([0, 0, *pads, 0, 0]), b.const([0.0]))
            pads = [0, 0, 0, 0]
        y = b.emit("AVG_POOL2D", x, b.const([0.0]), b.const([0.0]), kernel=size, stride=stride, pad=pads,
                   acc_type="fp32")
    return b.done(b.transpose(y, [0, 3, 1, 2]))


# -- the table -----------------------------------------------------------------------------------

_CMP = {"math.lt": ("GREATER", True, None), "math.gt": ("GREATER", False, None),
        "math.le": ("GREATER_EQUAL", True, None), "math.ge": ("GREATER_EQUAL", False, None),
        "math.eq": ("EQUAL", False, None), "math.ne": ("EQUAL", False, "LOGICAL_NOT")}

TABLE: dict[str, list[Rule]] = {
    "math.add": [Rule("ADD (+ RESHAPE for lhs/rhs_align)", _binary("ADD"))],
    "math.sub": [Rule("SUB (+ RESHAPE for alignment)", _binary("SUB"))],
    "math.mul": [Rule("MUL shift=0 (+ RESHAPE for alignment)", _binary("MUL"))],
    "math.div": [Rule("MUL(x, RECIPROCAL(y)) (+ RESHAPE for alignment)", _binary("MUL", rcp_rhs=True))],
    "math.min": [Rule("MINIMUM (+ RESHAPE for alignment)", _binary("MINIMUM"))],
    "math.max": [Rule("MAXIMUM (+ RESHAPE for alignment)", _binary("MAXIMUM"))],
    **{k: [Rule(f"{'LOGICAL_NOT(' if post else ''}{n}({'y, x' if sw else 'x, y'}){')' if post else ''}",
                _binary(n, swap=sw, post=post))] for k, (n, sw, post) in _CMP.items()},
    "math.and": [Rule("LOGICAL_AND", _binary("LOGICAL_AND"))],
    "math.or": [Rule("LOGICAL_OR", _binary("LOGICAL_OR"))],
    "math.xor": [Rule("LOGICAL_XOR", _binary("LOGICAL_XOR"))],
    "math.not": [Rule("LOGICAL_NOT", _unary("LOGICAL_NOT"))],
    "math.select": [Rule("SELECT (+ RESHAPE for alignment)", _select)],
    "math.iden": [Rule("IDENTITY", _unary("IDENTITY"))],
    "math.neg": [Rule("NEGATE (zero points 0)", _unary("NEGATE"))],
    "math.abs": [Rule("ABS", _unary("ABS"))],
    "math.exp": [Rule("EXP", _unary("EXP"))],
    "math.log": [Rule("LOG", _unary("LOG"))],
    "math.sqrt": [Rule("RECIPROCAL(RSQRT(x))", _unary("RSQRT", "RECIPROCAL"))],
    "math.rsqrt": [Rule("RSQRT", _unary("RSQRT"))],
    "math.rcp": [Rule("RECIPROCAL", _unary("RECIPROCAL"))],
    "math.floor": [Rule("FLOOR", _unary("FLOOR"))],
    "math.ceil": [Rule("CEIL", _unary("CEIL"))],
    "math.sin": [Rule("SIN", _unary("SIN"))],
    "math.cos": [Rule("COS", _unary("COS"))],
    "math.tanh": [Rule("TANH", _unary("TANH"))],
    "nn.sigmoid": [Rule("SIGMOID", _unary("SIGMOID"))],
    "nn.erf": [Rule("ERF", _unary("ERF"))],
    "nn.silu": [Rule("MUL(x, SIGMOID(x))", _silu)],
    "nn.relu": [Rule("alpha=null: CLAMP(0, max ?? inf); else MAXIMUM(MINIMUM(x, max), MUL(x, alpha))", _relu)],
    "nn.softmax": [Rule("REDUCE_MAX, SUB, EXP, REDUCE_SUM per axis, MUL by RECIPROCAL", _softmax)],
    "math.sum_reduce": [Rule("REDUCE_SUM per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_SUM"))],
    "math.max_reduce": [Rule("REDUCE_MAX per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_MAX"))],
    "math.min_reduce": [Rule("REDUCE_MIN per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_MIN"))],
    "math.prod_reduce": [Rule("REDUCE_PRODUCT per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_PRODUCT"))],
    "math.any_reduce": [Rule("REDUCE_ANY per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_ANY"))],
    "math.all_reduce": [Rule("REDUCE_ALL per axis (+ RESHAPE if squeeze)", _reduce("REDUCE_ALL"))],
    "math.mean_reduce": [Rule("REDUCE_SUM per axis, MUL by 1/count (+ RESHAPE if squeeze)",
                              _reduce("REDUCE_SUM", mean=True))],
    **{f"layout.{k}": [Rule("RESHAPE to the output shape", _to_output_shape)]
       for k in ("reshape", "flatten", "unflatten", "squeeze", "unsqueeze")},
    "layout.transpose": [Rule("TRANSPOSE", _transpose)],
    "layout.concat": [Rule("CONCAT", _concat)],
    "layout.slice": [Rule("SLICE (stride 1)", _slice, _slice_check)],
    "layout.pad": [Rule("PAD (method CONSTANT)", _pad, _pad_check)],
    "layout.tile": [Rule("TILE", _tile)],
    "linalg.matmul": [Rule("RESHAPE/TILE to rank 3, TRANSPOSE if transA/B, MATMUL, RESHAPE (+ ADD C)", _matmul)],
    "nn.linear": [Rule("MATMUL(x, TRANSPOSE(filter)) + ADD bias", _linear)],
    "nn.conv": [Rule("2-D NCX, groups 1 or depthwise: TRANSPOSE to NHWC/OHWI, CONV2D or DEPTHWISE_CONV2D, "
                     "TRANSPOSE back", _conv, _conv_check)],
    "nn.max_pool": [Rule("axes [2,3] of NCHW, dilation 1: TRANSPOSE to NHWC, MAX_POOL2D (PAD -inf if pad >= "
                         "kernel), TRANSPOSE back", _pool, _pool_check)],
    "nn.avg_pool": [Rule("axes [2,3] of NCHW, dilation 1: TRANSPOSE to NHWC, AVG_POOL2D (PAD 0 first if "
                         "ignore_border=false), TRANSPOSE back", _pool, _pool_check)],
}

_BOOL_OPS = {"math.and", "math.or", "math.xor", "math.not", "math.any_reduce", "math.all_reduce"}


def _dtype_reason(op: Any) -> str | None:
    tensors = [t for v in op.inputs for t in (v if isinstance(v, list) else [v]) if t is not None]
    for i, t in enumerate(tensors + list(op.outputs)):
        if isinstance(t, list) or any(d is None for d in t.shape):
            return "dynamic shape or output pack"
        if 0 in t.shape:
            return f"empty tensor {t.name!r} (TOSA extents must be positive)"
        want = "real"
        if op.op in _BOOL_OPS or (op.op == "math.select" and i == 0) or (op.op in _CMP and t in op.outputs):
            want = "bool"
        elif op.op == "math.select" or op.op in ("math.iden", "layout.reshape", "layout.flatten",
                                                  "layout.unflatten", "layout.squeeze", "layout.unsqueeze",
                                                  "layout.transpose", "layout.concat", "layout.slice",
                                                  "layout.tile", "layout.pad"):
            want = t.dtype if t.dtype in ("real", "bool") else "real"
        if t.dtype != want:
            return f"{t.dtype} tensor {t.name!r} (only fp32 real / bool map to TOSA here)"
    return None


def legalize(op: Any) -> tuple[Subgraph | None, str]:
    """``(subgraph, rule description)``, or ``(None, reason)`` when the operation falls back to @lower."""
    rules = TABLE.get(op.op)
    if not rules:
        return None, f"no TOSA mapping for {op.op}"
    if op.binding is None:
        return None, "no binding"
    reason = _dtype_reason(op)
    if reason:
        return None, reason
    reasons = []
    for rule in rules:
        why = rule.check(op)
        if why is None:
            return rule.build(op), rule.description
        reasons.append(why)
    return None, "; ".join(reasons)


def coverage(graph: Any) -> list[tuple[Any, bool, str]]:
    """``(operation, legalized, reason)`` for every operation of ``graph`` (and its subgraphs)."""
    result = []
    for op in graph.operations:
        if op.subgraphs:
            result.append((op, False, f"control flow ({op.op})"))
            for sub in op.subgraphs.values():
                result.extend(coverage(sub))
            continue
        sg, reason = legalize(op)
        result.append((op, sg is not None, reason))
    return result
