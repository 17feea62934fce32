"""The conformance readers and runners, apart from the target tables they check.

Each reader turns one conformance vector of a target into a SkriptND model folder (stdlib operators,
@quantize for quantized tensors), which the runner composes and runs as ``sknd run`` does:

- :mod:`.vectors`: reading a vector file, and located diagnostics (E09xx) for a malformed one;
- :mod:`.nnapi_import` (with its builder, :mod:`.nnapi_builder`) and :mod:`.mli_import`: the readers
  (``to_sknd``), NNAPI CTS models and embARC MLI cases;
- :mod:`.runner`: the run ``sknd run`` does (integer TOSA, fake quantization, float TOSA);
- :mod:`.nnapi_run` and :mod:`.mli_run`: each target's comparison with its expected outputs (the CTS's
  tolerances; MLI's metrics and CRC32).

Nothing here imports the target tables (``skriptnd.targets.nnapi`` / ``.mli``), which re-export the readers'
``to_sknd``.
"""
