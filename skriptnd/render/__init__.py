"""Pictures of a composed graph without graphviz: ``sknd compose --format svg|html``.

``layout`` places boxes in layers (pure geometry), ``scene`` turns a graph into boxes and edges, ``colours``
says what colour each operation gets (where it runs, or a target's support), ``svg`` and ``html`` write the
files. The part sits above ``targets`` because the colours ask the legalization, the kernels and the targets.
"""

from __future__ import annotations

from skriptnd.render.colours import Colouring, by_backend, by_target
from skriptnd.render.html import to_html
from skriptnd.render.svg import to_svg

__all__ = ["Colouring", "by_backend", "by_target", "to_html", "to_svg"]
