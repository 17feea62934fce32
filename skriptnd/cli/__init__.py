"""The ``sknd`` command line: one module per command (``app.COMMANDS`` lists them, each loaded when it runs),
the options they share in ``options``, and the helpers they share in ``io``, ``inputs``, ``backend``,
``loading`` and ``report`` (no command module imports another)."""

# the console entry point (pyproject: skriptnd.cli.app:main); also here, where the `sknd` scripts of
# installs made before the cli became a package look for it
from skriptnd.cli.app import main

__all__ = ["main"]
