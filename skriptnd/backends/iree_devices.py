"""Where the iree backend runs a graph: ``--device cpu | cuda[:ARCH] | vulkan[:TARGET] | hip[:ARCH]``.

One table (:data:`KINDS`) says, per kind of device, which IREE HAL target device the compiler builds for,
which flag names the architecture and its default, and which IREE runtime driver opens the device. The
defaults are the ones checked to compile our TOSA MLIR (the shipped models, IREE 3.13):

* ``cuda``: ``--iree-cuda-target=sm_80`` (Ampere PTX). IREE 3.13 refuses ``sm_90`` ("missing GPU target in
  #hal.executable.target") and crashes on ``sm_100`` / ``hopper`` / ``h100``; PTX for sm_80 is
  JIT-compiled by the driver for any newer GPU (Hopper, Ada, Blackwell), so sm_80 is the default that
  works everywhere from Ampere on. sm_60 ... sm_89 and sm_120 compile too.
* ``vulkan``: IREE's own default target (the portable ``vp_android_baseline_2022`` SPIR-V profile: any
  Vulkan 1.1 device runs it); a named target (``vulkan:ampere``, ``vulkan:rdna3``, ``vulkan:valhall4``)
  uses that GPU's subgroups and larger workgroups.
* ``hip``: ``--iree-rocm-target=gfx942`` (MI300); ``hip:gfx90a`` (MI250), ``hip:gfx1100`` (RDNA3), ...
* ``cpu``: llvm-cpu for the host (``Options.target`` picks another CPU), the default.

A device is opened (the runtime driver loaded and a device created) before anything is compiled, so that a
machine without it gets a located E0786 naming the device and the driver's own reason at once, rather than
after a compile of minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from skriptnd.diagnostics import Diagnostic, DiagnosticError, register_codes
from skriptnd.source import Span

register_codes({"E0786": "device not available"})


@dataclass(frozen=True)
class DeviceKind:
    """One kind of device: how IREE compiles for it and opens it."""

    name: str
    #: ``--iree-hal-target-device``
    hal_device: str
    #: the flag naming the architecture (None: the CPU, whose target is ``Options.target``)
    target_flag: str | None
    #: the architecture when none is given (None: the compiler's own default)
    default_arch: str | None
    #: the IREE runtime driver (the CPU's is local-task, or local-sync with one thread)
    driver: str
    #: what the machine needs, for the diagnostic when the device cannot be opened
    needs: str
    #: architectures checked to compile our MLIR with IREE 3.13 (for the hint of a failed compile)
    known: tuple[str, ...] = ()


KINDS: dict[str, DeviceKind] = {
    "cpu": DeviceKind("cpu", "local", None, None, "local-task", "nothing"),
    "cuda": DeviceKind("cuda", "cuda", "--iree-cuda-target", "sm_80", "cuda",
                       "an NVIDIA GPU and its driver (libcuda.so)",
                       ("sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_120", "ampere", "ada")),
    "vulkan": DeviceKind("vulkan", "vulkan", "--iree-vulkan-target", None, "vulkan",
                         "a GPU with a Vulkan driver and the Vulkan loader (libvulkan.so.1)",
                         ("ampere", "ada", "rdna3", "valhall4", "sm_80")),
    "hip": DeviceKind("hip", "hip", "--iree-rocm-target", "gfx942", "hip",
                      "an AMD GPU with ROCm (libamdhip64.so)", ("gfx90a", "gfx942", "gfx1100")),
}
#: Other names accepted for a kind.
ALIASES = {"rocm": "hip", "host": "cpu", "local": "cpu"}


@dataclass(frozen=True)
class Device:
    """A parsed ``--device`` value."""

    kind: DeviceKind
    arch: str | None = None

    @property
    def is_cpu(self) -> bool:
        return self.kind.name == "cpu"

    @property
    def target(self) -> str | None:
        """The architecture compiled for: the one given, else the kind's default."""
        return self.arch or self.kind.default_arch

    def __str__(self) -> str:
        return f"{self.kind.name}:{self.target}" if self.target else self.kind.name

    def compile_flags(self) -> list[str]:
        """The HAL target flags of a GPU (the CPU's are via_iree.compile_flags' own)."""
        flags = [f"--iree-hal-target-device={self.kind.hal_device}"]
        if self.kind.target_flag and self.target:
            flags.append(f"{self.kind.target_flag}={self.target}")
        return flags

    def driver(self, threads: int | None) -> str:
        if self.is_cpu:
            return "local-sync" if threads == 1 else "local-task"
        return self.kind.driver


CPU = Device(KINDS["cpu"])


def choices() -> str:
    return "cpu, cuda[:ARCH], vulkan[:TARGET], hip[:ARCH]"


def parse(text: str | None) -> Device:
    """The device ``text`` names (None or empty: the CPU); ValueError saying what is accepted."""
    if not text:
        return CPU
    name, _, arch = text.strip().partition(":")
    name = ALIASES.get(name.lower(), name.lower())
    if name not in KINDS:
        raise ValueError(f"unknown device '{text}'; choose one of {choices()}")
    if arch and name == "cpu":
        raise ValueError(f"'{text}': the CPU takes no architecture here; name the CPU with --target "
                         f"(e.g. --target znver4)")
    if ":" in text and not arch:
        raise ValueError(f"'{text}' names no architecture after ':'; e.g. {name}:{KINDS[name].known[0]}"
                         if KINDS[name].known else f"'{text}' names no architecture after ':'")
    return Device(KINDS[name], arch or None)


def unavailable(device: Device, driver: str, reason: str, span: Span, graph_name: str) -> DiagnosticError:
    """E0786: the device cannot be opened here (no GPU, no driver library)."""
    reason = " ".join(reason.split()).replace("Exception for last tried follows.", "").replace(". :", ":")
    return DiagnosticError([Diagnostic(
        code="E0786", span=span,
        message=f"the graph '{graph_name}' is to run on --device {device}, but this machine has no usable "
                f"{device.kind.name} device: the IREE runtime's '{driver}' driver could not create one ({reason})",
        hint=f"run it where there is {device.kind.needs}, or with --device cpu (the default)")])


def compile_hint(device: Device) -> str | None:
    """What to try when iree-compile fails for a GPU (None for the CPU)."""
    if device.is_cpu:
        return None
    known = ", ".join(device.kind.known)
    default = f" (the default, {device.kind.default_arch})" if device.kind.default_arch else " (IREE's default)"
    return (f"compiled for --device {device}: try --device {device.kind.name}{default}; targets known to compile "
            f"with IREE 3.13: {known}; or --via iree --device cpu")
