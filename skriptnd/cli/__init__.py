"""The ``sknd`` command line: one module per command (``app.COMMANDS`` lists them, each loaded when it runs),
the options they share in ``options``, and the helpers they share in ``io``, ``inputs``, ``backend``,
``loading`` and ``report`` (no command module imports another)."""
