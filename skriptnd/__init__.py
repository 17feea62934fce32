"""skriptnd: a toolchain for SkriptND, the language of NNEF 2.0."""

__version__ = "0.1.0"
