"""What the host CPU can do, read once from /proc/cpuinfo (Linux) or the platform module elsewhere.

Engines pick kernels by CPU feature, and some of those kernels are wrong on some hosts: onnxruntime's
fused int8 kernels saturate on x86 CPUs without a dot-product instruction for int8 (AVX2 without VNNI:
``vpmaddubsw`` adds pairs of u8*s8 products into int16), and IREE's data tiling miscompiles some graphs on
AVX-512 hosts. The backends ask here which case they are in. Imports nothing of skriptnd.
"""

from __future__ import annotations

import platform
from functools import cache

#: x86 features that give onnxruntime an int8 dot product that accumulates in int32 without saturating
INT8_DOT_FEATURES = frozenset({"avx512_vnni", "avx_vnni", "amx_int8", "avx_vnni_int8"})


@cache
def flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``'s ``flags`` line, lower case); empty where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].lower().split())
    except OSError:
        pass
    return frozenset()


def is_x86() -> bool:
    return platform.machine().lower() in {"x86_64", "amd64", "i386", "i686"}


def has_avx512() -> bool:
    return any(f.startswith("avx512") for f in flags())


def int8_saturates() -> bool:
    """True where onnxruntime's fused u8s8 kernels may saturate (x86 without VNNI or AMX): there int8 QDQ
    graphs must run unfused to give the answer the ONNX semantics define."""
    return is_x86() and not (flags() & INT8_DOT_FEATURES)
