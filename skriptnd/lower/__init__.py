"""The @lower evaluator (spec §2.12): vectorised numpy execution of lowering formulas.

    plan = compile_lowering(definition, binding)   # analysis, once per binding
    outputs = plan.run(inputs)                      # numpy arrays (lists for tensor packs)

`run_lowering(definition, binding, inputs)` does both. Errors are `LoweringError`s (code E0710)
located at the formula that failed.

The modules, bottom up (each imports only those before it): `values` (the kinds of staged values and
their types), `ops` (the scalar operators on concrete values), `staging` (what a stager holds, lifting
into `Dyn` closures), `access` (tensor accesses: views or gathers), `stage` (the evaluation of each kind
of expression), `step` (running one formula instance), `plan` (compiling a @lower block into steps).
"""

from skriptnd.lower.plan import CHUNK_ELEMENTS, LoweringPlan, compile_lowering, run_lowering
from skriptnd.lower.values import NP_DTYPES, LoweringError, np_dtype

__all__ = ["CHUNK_ELEMENTS", "NP_DTYPES", "LoweringError", "LoweringPlan", "compile_lowering", "np_dtype",
           "run_lowering"]
