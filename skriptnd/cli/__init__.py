"""The ``sknd`` command line: one module per command, the options they share in ``graph`` and ``io``."""
