"""The SkriptND abstract syntax tree.

Frozen dataclasses, one per syntactic construct of spec chapter 2. Every node carries the
`span` of source it came from; spans take no part in equality, so two trees compare equal
when they mean the same program (the formatter round-trip relies on that). Later stages
(checker, composer) only ever see these nodes, never Lark parse trees.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Literal

from skriptnd.source import NO_SPAN, Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    span: Span = field(default=NO_SPAN, compare=False, repr=False)

    def children(self) -> Iterator[Node]:
        """Direct child nodes, in source order (like ast.iter_child_nodes)."""
        for name in _field_names(type(self))[1:]:  # span first, and it is not a node
            yield from _nodes_in(getattr(self, name))

    def __reduce__(self) -> tuple:
        # pickled as the field values in order (the parse cache): the dataclass default restores
        # each node through `fields()`, which made loading a cached module 5x slower
        return _restore, (type(self), tuple(getattr(self, n) for n in _field_names(type(self))))

    def walk(self) -> Iterator[Node]:
        """This node and all its descendants, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of a node class, `span` first (it is declared by Node), cached:
    `dataclasses.fields` builds its tuple anew on every call."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
        assert names[0] == "span"
    return names


def _restore(cls: type, values: tuple) -> Node:
    node = object.__new__(cls)
    for name, value in zip(_field_names(cls), values, strict=True):
        object.__setattr__(node, name, value)
    return node


def _nodes_in(value: object) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from _nodes_in(item)


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True, kw_only=True)
class Expr(Node):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class IntLit(Expr):
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RealLit(Expr):
    value: float
    text: str = field(default="", compare=False)  # as written, so `1e-5` prints back as such


@dataclass(frozen=True, slots=True, kw_only=True)
class BoolLit(Expr):
    value: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedConst(Expr):
    """The real constants `inf` and `pi`."""

    name: Literal["inf", "pi"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FormatField(Node):
    """A `{expr}` inside a string literal."""

    value: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class StrLit(Expr):
    """A string literal (adjacent literals already joined): text pieces and format fields."""

    parts: tuple[str | FormatField, ...]

    @property
    def is_plain(self) -> bool:
        return all(isinstance(p, str) for p in self.parts)

    @property
    def text(self) -> str:
        """The literal text with format fields left out (only meaningful when is_plain)."""
        return "".join(p for p in self.parts if isinstance(p, str))


@dataclass(frozen=True, slots=True, kw_only=True)
class Name(Expr):
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Property(Expr):
    """`x.shape`, `x.rank` or `x.size`."""

    value: Expr
    name: Literal["shape", "rank", "size"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Unary(Expr):
    """`-x`, `+x`, `!x` and the null test `?x`."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Binary(Expr):
    """All infix operators, including `??`, `is`, `in`, `<?`, `>?`, `=>`."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold(Expr):
    """`x + ..` (fold) or `x + ...` (cumulative fold); op may also be `:=` (uniform value)."""

    op: str
    operand: Expr
    cumulative: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Select(Expr):
    """`c ? a : b`, or `c ? a` (orelse None: null when c is false)."""

    cond: Expr
    then: Expr
    orelse: Expr | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cast(Expr):
    """`int(x)`, `real(x)`, `bool(x)` or the default value `int()` (arg None)."""

    type: str
    arg: Expr | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip(Expr):
    """`~`: an omitted invocation argument."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttrAssign(Node):
    name: str
    value: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Call(Expr):
    """`name(args)`: a built-in function, a generic cast `T(x)` or an operator invocation.

    Which one is decided by the checker, which knows the declared names; the parser only
    knows the syntax, and the syntax is shared (spec §2.4, built-in functions).
    """

    callee: str  # possibly qualified: `nn.conv`
    args: tuple[Expr, ...]
    type_args: tuple[str, ...] = ()
    attrs: tuple[AttrAssign, ...] = ()
    label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Expand(Expr):
    """`x..` or `x..(n)` inside a list, or an expanded tensor index `i..`."""

    value: Expr
    count: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Range(Expr):
    """`b:e:s` as a list item or a slice; any bound may be None inside subscripts."""

    start: Expr | None
    stop: Expr | None
    step: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Zip(Expr):
    """`(a, b)..` inside a list: interleaves packs."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscript(Expr):
    """Pack or string indexing `a[i]`, slicing `a[i:j:k]` (index is a Range) or masking."""

    value: Expr
    index: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounded(Expr):
    """A guarded tensor index `|i|`, or a remapped one `|i <> lo : hi|`."""

    value: Expr
    low: Expr | None = None
    high: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorAccess(Expr):
    """`x[i, j]`, `x[i,]`, `x[]`, `x[k][i, j]`; indices may be Expand, Bounded or Range."""

    tensor: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Substitute(Expr):
    """`a[i] <- b`: a copy of pack a with the items at i replaced by b."""

    value: Expr
    index: Expr
    replacement: Expr


# ---------------------------------------------------------------- types


@dataclass(frozen=True, slots=True, kw_only=True)
class PackSpec(Node):
    """`..` or `..(n)` after a type, an extent or a left-hand side."""

    length: Expr | None = None
    bound: Expr | None = None  # `..(s|5)`: a dynamic length with its upper bound


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeItem(Node):
    """One extent of a shape: `m`, `s..(d)`, `..t`, `~`, `s|10`, `~|10 ..(3)`."""

    value: Expr | None  # None for `~`
    distinct: bool = False  # `..t`: one extent per item of a tensor pack
    bound: Expr | None = None  # upper bound after `|`
    pack: PackSpec | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeSpec(Node):
    """`optional T^(r)[shape]..(n)`; shape None means no `[...]` was written."""

    name: str
    optional: bool = False
    rank: str | None = None
    shape: tuple[ShapeItem, ...] | None = None
    pack: PackSpec | None = None


# ---------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True, kw_only=True)
class DtypeDecl(Node):
    name: str
    base: str
    default: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopBound(Node):
    """`i < n`: an index symbol running over [0, n)."""

    index: str
    bound: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamDecl(Node):
    """An attribute, input, output, constant or variable declaration."""

    name: str
    type: TypeSpec
    default: Expr | None = None
    bounds: tuple[LoopBound, ...] = ()


# Left-hand sides of @using and @compose assignments.


@dataclass(frozen=True, slots=True, kw_only=True)
class LValue(Node):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class LName(LValue):
    name: str
    type: TypeSpec | None = None
    pack: PackSpec | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LList(LValue):
    items: tuple[LValue, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LZip(LValue):
    items: tuple[LName, ...]
    pack: PackSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class LSkip(LValue):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class UsingDecl(Node):
    target: LValue
    value: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class AssertArg(Node):
    value: Expr
    label: str | None = None
    label_quoted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Assertion(Node):
    condition: Expr
    message: StrLit | None = None
    args: tuple[AssertArg, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IterCount(Node):
    """`..(i -> n)`, `..(n)`, `..(i ->)`."""

    index: str | None = None
    count: Expr | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalAssign(Node):
    name: str
    value: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Lowering(Node):
    """One @lower formula: `[unroll..(k -> n)] [with z = e:] y[i..] op= e, i < n | cond;`."""

    target: Expr
    op: str
    value: Expr
    bounds: tuple[LoopBound, ...] = ()
    condition: Expr | None = None
    locals: tuple[LocalAssign, ...] = ()
    unroll: IterCount | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantization(Node):
    tensor: str  # possibly a scoped name `op1.w`
    op: str
    type_args: tuple[str, ...] = ()
    attrs: tuple[AttrAssign, ...] = ()


# ---------------------------------------------------------------- @compose


@dataclass(frozen=True, slots=True, kw_only=True)
class Stmt(Node):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockExpr(Expr):
    """`{ stmt; ...; yield a, b; }` used as a right-hand side or control-flow branch."""

    stmts: tuple[Stmt, ...]
    label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IfExpr(Expr):
    """`if c then a elif d then b else e`: branches is ((c, a), (d, b))."""

    branches: tuple[tuple[Expr, Expr], ...]
    orelse: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Carried(Node):
    """A loop-carried variable of a `with` clause."""

    name: str
    value: Expr
    type: TypeSpec | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scan(Node):
    """A `for item : pack` scan input."""

    name: str
    pack: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopExpr(Expr):
    body: Expr
    carried: tuple[Carried, ...] = ()
    scans: tuple[Scan, ...] = ()
    pre_cond: Expr | None = None  # `while c do ...`
    post_cond: Expr | None = None  # `do ... while c`
    count: IterCount | None = None
    unroll: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Assign(Stmt):
    targets: tuple[LValue, ...]
    value: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class Yield(Stmt):
    values: tuple[Expr, ...]


# ---------------------------------------------------------------- blocks and documents

ParamKind = Literal["attrib", "input", "output", "constant", "variable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block(Node):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class DtypeBlock(Block):
    items: tuple[DtypeDecl, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamBlock(Block):
    kind: ParamKind
    items: tuple[ParamDecl, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UsingBlock(Block):
    items: tuple[UsingDecl, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssertBlock(Block):
    items: tuple[Assertion, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LowerBlock(Block):
    items: tuple[Lowering, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ComposeBlock(Block):
    kind: Literal["compose", "update"]
    items: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantizeBlock(Block):
    items: tuple[Quantization, ...]


def block_name(block: Block) -> str:
    """The `@name` keyword a block is written with."""
    if isinstance(block, ParamBlock | ComposeBlock):
        return block.kind
    return {
        DtypeBlock: "dtype",
        UsingBlock: "using",
        AssertBlock: "assert",
        LowerBlock: "lower",
        QuantizeBlock: "quantize",
    }[type(block)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Definition(Node):
    """An `operator` or `graph` definition."""

    kind: Literal["operator", "graph"]
    name: str
    blocks: tuple[Block, ...]
    public: bool = False
    name_span: Span = field(default=NO_SPAN, compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Import(Node):
    module: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Comment(Node):
    text: str  # including the leading '#'


@dataclass(frozen=True, slots=True, kw_only=True)
class Module(Node):
    definitions: tuple[Definition, ...]
    imports: tuple[Import, ...] = ()
    version: tuple[int, int] | None = None
    extensions: tuple[str, ...] = ()
    comments: tuple[Comment, ...] = field(default=(), compare=False, repr=False)
    path: str = field(default="<string>", compare=False)


