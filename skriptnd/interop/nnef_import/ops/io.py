"""Declarations and state: external/variable/constant are written by the importer as @input/@variable/
@constant; `update` (a variable's new value) has no counterpart in a SkriptND graph's data flow."""

from skriptnd.interop.nnef_import.registry import DECLARED, unsupported

DECLARED.update({
    "external": "`@input` declaration (shape from the graph or `input_shapes`)",
    "variable": "`@variable` declaration; its `.dat` file is validated and copied byte for byte",
    "constant": "`@constant` declaration (a single value is broadcast to the shape)",
})
unsupported("stateful variable update; SkriptND graphs have no assignment to variables", "update")
