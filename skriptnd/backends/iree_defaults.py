"""The iree backend's default optimisation flags, chosen per target CPU: right on every host first, fast second.

Data tiling (``--iree-opt-data-tiling``) with IREE's micro-kernels makes the patch products of
skriptnd.tosa.program.patch_matmul and the small per-step products of recurrent layers fast (docs/performance.md).
But IREE 3.13 **miscompiles** with data tiling on AVX-512 CPUs: on an Emerald Rapids host, LayerNorm
(``moments`` / sub / add / sqrt / div) feeding a ``[2,10,32] x [32,128]`` matmul gave errors of 3.2 on outputs
of magnitude 1.9, and ConvNeXt-T's logits were off by 1.4e-2; the same graphs are right with
``--iree-opt-data-tiling=false`` or on a CPU without AVX-512 (issue 30). So data tiling is on only for targets
without AVX-512 (the AVX2 hosts this project measures on, generic targets, other architectures); where it is
off, ``sknd run -v`` says why. The self-check of every newly compiled module (skriptnd.backends.iree_check)
catches what this list does not know.

Both sets raise iree-compile's stack limit for one dispatch from 32 KiB to 64 KiB
(:data:`STACK_LIMIT`). With data tiling, a matmul whose bias-and-activation epilogue has two results (a
1x1 convolution followed by hardswish and a global average pool: IREE fuses hardswish's product into the
pool's reduction, so the matmul's dispatch writes both x and clamp(x/6 + 1/2, 0, 1)) unpacks one result
tile on the stack; IREE sizes that tile by ``--iree-llvmcpu-matmul-tile-bytes`` and lets it grow to a whole
matrix dimension (49 x 960 here: a 56 x 192 f32 tile, 43 KiB), over the 32 KiB default. MobileNetV3,
EfficientNet and DeepLabV3-MobileNetV3 failed to compile for it (issue 30). IREE's task workers get a
128 KiB stack (``--task_worker_stack_size`` of the runtime), so 64 KiB stays well within it; the inline
(``local-sync``) driver runs dispatches on the caller's thread, whose stack is larger.
"""

from __future__ import annotations

import platform

#: The per-dispatch stack limit (IREE's default is 32 KiB): see the module docstring.
STACK_LIMIT = "--iree-llvmcpu-stack-allocation-limit=65536"
#: With data tiling: IREE packs matmul operands for its micro-kernels (the fast path on AVX2).
DATA_TILING = ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all", STACK_LIMIT)
#: Without: IREE's default codegen; micro-kernels stay on for what they cover without packing.
NO_DATA_TILING = ("--iree-opt-data-tiling=false", "--iree-llvmcpu-enable-ukernels=all", STACK_LIMIT)

#: LLVM x86 CPU names whose feature set includes AVX-512 (``--target NAME``).
AVX512_CPUS = frozenset({
    "knl", "knm", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
    "icelake-server", "rocketlake", "tigerlake", "sapphirerapids", "emeraldrapids", "graniterapids",
    "graniterapids-d", "diamondrapids", "znver4", "znver5", "x86-64-v4"})


def host_cpu_flags() -> set[str]:
    """The feature flags of this machine's CPU (``/proc/cpuinfo``: what ``--iree-llvmcpu-target-cpu=host``
    resolves against); empty where that cannot be read (then data tiling stays on: no AVX-512 known)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def avx512_reason(target: str) -> str | None:
    """Why data tiling is unsafe for ``target`` (``host``, an LLVM CPU name or a target triple), or None."""
    if target == "host":
        if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
            return None
        found = sorted(f for f in host_cpu_flags() if f.startswith("avx512"))
        return f"this CPU has AVX-512 ({', '.join(found[:3])}{', …' if len(found) > 3 else ''})" if found else None
    if target.lower() in AVX512_CPUS:
        return f"the target CPU {target} has AVX-512"
    return None


def default_flags(target: str) -> tuple[tuple[str, ...], str]:
    """(the default optimisation flags for ``target``, why they were chosen: one line for ``sknd run -v``)."""
    reason = avx512_reason(target)
    if reason is None:
        return DATA_TILING, "data tiling on (no AVX-512 in the target)"
    return NO_DATA_TILING, (f"data tiling off: {reason}, where IREE 3.13 miscompiles with data tiling "
                            "(LayerNorm -> MatMul; docs/performance.md); --iree-flag=--iree-opt-data-tiling "
                            "turns it on anyway")
