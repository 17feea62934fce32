"""Post-training static quantization (``sknd quantize``): a float model folder and calibration samples in,
the same model folder with a ``@quantize`` block out, chosen so that it runs as an integer TOSA graph.

``data`` reads and checks the calibration samples; ``plan`` decides which tensors get entries; ``observe``
runs the float graph and records their ranges; ``scales`` turns ranges and weights into parameters per
method and target; ``write`` writes the folder atomically; ``quantizer`` does it all and measures the SQNR.
"""

from __future__ import annotations

from skriptnd.quantize.data import Calibration, load_calibration
from skriptnd.quantize.quantizer import Result, Settings, quantize_model, sqnr_db
from skriptnd.quantize.scales import Method, Target

__all__ = ["Calibration", "Method", "Result", "Settings", "Target", "load_calibration", "quantize_model", "sqnr_db"]
