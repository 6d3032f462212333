"""GPU product catalogue for the simulated NVML: names, memory, SMs, GPM and MIG profiles.

Used to fill in what a machine file leaves out, to give memory to the devices of an
``nvidia-smi -L`` listing (which names only models and profiles), and to infer MIG
profile names from SM count and memory in ``nvidia-smi -q`` captures, as ``nvidia-smi -L``
would print them.

Sources: per-profile SM counts and memory measured in the real captures of
``shared/fixtures/real-gpus`` (H100 80GB, H200, A100-SXM4-80GB) and NVIDIA's MIG user
guide profile tables ("Supported MIG Profiles"); profile ids are the ``info.id`` of
``nvmlDeviceGetGpuInstanceProfileInfo`` (19 = 1g, 15 = 1g double memory, 14 = 2g,
9 = 3g, 5 = 4g, 0 = 7g). Values not in a capture are the guide's figures rounded to
what the driver reports and may differ by a few MiB from a given driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# NVML_DEVICE_ARCH_* (nvml.h nvmlDeviceArchitecture_t)
ARCH_VOLTA, ARCH_TURING, ARCH_AMPERE, ARCH_ADA, ARCH_HOPPER, ARCH_BLACKWELL = 5, 6, 7, 8, 9, 10
ARCH_UNKNOWN = 0xFFFFFFFF


@dataclass(frozen=True)
class MigProfile:
    """A GPU instance profile.

    Attributes:
        name: e.g. ``"1g.10gb"`` (no compute-instance prefix).
        slices: GPU (compute) slices, the ``<g>`` of the name.
        memory_mib: memory of a GPU instance of this profile, MiB.
        sm_count: SMs of a GPU instance of this profile (its full compute instance).
        profile_id: ``nvmlGpuInstanceProfileInfo_t.id``.
    """

    name: str
    slices: int
    memory_mib: int
    sm_count: int
    profile_id: int


@dataclass(frozen=True)
class GpuModel:
    """One GPU product.

    Attributes:
        key: catalogue key used by machine files (``model = "H100-SXM5-80GB"``).
        name: ``nvmlDeviceGetName`` answer.
        memory_total_mib: ``nvmlDeviceGetMemoryInfo().total`` / MiB.
        memory_reserved_mib: ``nvmlDeviceGetMemoryInfo_v2().reserved`` / MiB on an idle GPU.
        sm_count: ``nvmlDeviceGetAttributes().multiprocessorCount`` of the whole GPU.
        arch: ``nvmlDeviceGetArchitecture`` (``NVML_DEVICE_ARCH_*``).
        power_limit_w: enforced power limit, W.
        ecc: ECC supported (False on GeForce: ECC calls answer NOT_SUPPORTED).
        mig_profiles: GPU instance profiles; empty = not MIG-capable.
        pci_device_id: ``nvmlPciInfo_t.pciDeviceId``.
        cuda_capability: ``nvmlDeviceGetCudaComputeCapability``.
    """

    key: str
    name: str
    memory_total_mib: int
    memory_reserved_mib: int
    sm_count: int
    arch: int
    power_limit_w: float
    ecc: bool = True
    mig_profiles: tuple[MigProfile, ...] = field(default=())
    pci_device_id: int = 0x000010DE
    cuda_capability: tuple[int, int] = (0, 0)

    @property
    def gpm(self) -> bool:
        """GPM is available on Hopper and later data-centre GPUs (nvml.h GPM group)."""
        return self.arch in (ARCH_HOPPER, ARCH_BLACKWELL)

    @property
    def mig_capable(self) -> bool:
        """True when the product has MIG profiles."""
        return bool(self.mig_profiles)

    def profile(self, name: str) -> MigProfile | None:
        """The GPU instance profile for a device profile name (``"1g.10gb"`` or ``"2c.3g.40gb"``)."""
        gi_name = gi_profile_name(name)
        for prof in self.mig_profiles:
            if prof.name == gi_name:
                return prof
        return None


def gi_profile_name(name: str) -> str:
    """Strip a compute-instance prefix: ``"1c.3g.71gb"`` → ``"3g.71gb"``."""
    return re.sub(r"^\d+c\.", "", name)


def ci_slices(name: str) -> int | None:
    """Compute-instance slices of a split profile name (``"2c.3g.71gb"`` → 2), or None."""
    m = re.match(r"^(\d+)c\.", name)
    return int(m.group(1)) if m else None


def _p(name: str, mem: int, sm: int, pid: int) -> MigProfile:
    return MigProfile(name, int(name.split("g", 1)[0]), mem, sm, pid)


_H100_PROFILES = (
    _p("1g.10gb", 9984, 16, 19),
    _p("1g.10gb+me", 9984, 16, 20),
    _p("1g.20gb", 20096, 26, 15),
    _p("2g.20gb", 20096, 32, 14),
    _p("3g.40gb", 40448, 60, 9),
    _p("4g.40gb", 40448, 64, 5),
    _p("7g.80gb", 80512, 132, 0),
)
_H200_PROFILES = (
    _p("1g.18gb", 16384, 16, 19),
    _p("1g.18gb+me", 16384, 16, 20),
    _p("1g.35gb", 33280, 26, 15),
    _p("2g.35gb", 33280, 32, 14),
    _p("3g.71gb", 71424, 60, 9),
    _p("4g.71gb", 71424, 64, 5),
    _p("7g.141gb", 142848, 132, 0),
)
_A100_80_PROFILES = (
    _p("1g.10gb", 9728, 14, 19),
    _p("1g.10gb+me", 9728, 14, 20),
    _p("1g.20gb", 19968, 14, 15),
    _p("2g.20gb", 19968, 28, 14),
    _p("3g.40gb", 40192, 42, 9),
    _p("4g.40gb", 40192, 56, 5),
    _p("7g.80gb", 80896, 98, 0),
)
_A100_40_PROFILES = (
    _p("1g.5gb", 4864, 14, 19),
    _p("1g.5gb+me", 4864, 14, 20),
    _p("1g.10gb", 9984, 14, 15),
    _p("2g.10gb", 9984, 28, 14),
    _p("3g.20gb", 19968, 42, 9),
    _p("4g.20gb", 19968, 56, 5),
    _p("7g.40gb", 40192, 98, 0),
)
_A30_PROFILES = (
    _p("1g.6gb", 5952, 14, 14),
    _p("1g.6gb+me", 5952, 14, 21),
    _p("2g.12gb", 11968, 28, 5),
    _p("4g.24gb", 24064, 56, 0),
)

CATALOGUE: tuple[GpuModel, ...] = (
    GpuModel(
        "H100-SXM5-80GB",
        "NVIDIA H100 80GB HBM3",
        81559,
        479,
        132,
        ARCH_HOPPER,
        700.0,
        mig_profiles=_H100_PROFILES,
        pci_device_id=0x233010DE,
        cuda_capability=(9, 0),
    ),
    GpuModel(
        "H100-PCIE-80GB",
        "NVIDIA H100 PCIe",
        81559,
        479,
        114,
        ARCH_HOPPER,
        350.0,
        mig_profiles=_H100_PROFILES,
        pci_device_id=0x233110DE,
        cuda_capability=(9, 0),
    ),
    GpuModel(
        "H200-141GB",
        "NVIDIA H200",
        143771,
        560,
        132,
        ARCH_HOPPER,
        700.0,
        mig_profiles=_H200_PROFILES,
        pci_device_id=0x233510DE,
        cuda_capability=(9, 0),
    ),
    GpuModel(
        "A100-SXM4-80GB",
        "NVIDIA A100-SXM4-80GB",
        81920,
        763,
        108,
        ARCH_AMPERE,
        400.0,
        mig_profiles=_A100_80_PROFILES,
        pci_device_id=0x20B210DE,
        cuda_capability=(8, 0),
    ),
    GpuModel(
        "A100-PCIE-80GB",
        "NVIDIA A100 80GB PCIe",
        81920,
        763,
        108,
        ARCH_AMPERE,
        300.0,
        mig_profiles=_A100_80_PROFILES,
        pci_device_id=0x20B510DE,
        cuda_capability=(8, 0),
    ),
    GpuModel(
        "A100-SXM4-40GB",
        "NVIDIA A100-SXM4-40GB",
        40960,
        586,
        108,
        ARCH_AMPERE,
        400.0,
        mig_profiles=_A100_40_PROFILES,
        pci_device_id=0x20B010DE,
        cuda_capability=(8, 0),
    ),
    GpuModel(
        "A30",
        "NVIDIA A30",
        24576,
        504,
        56,
        ARCH_AMPERE,
        165.0,
        mig_profiles=_A30_PROFILES,
        pci_device_id=0x20B710DE,
        cuda_capability=(8, 0),
    ),
    GpuModel("L40S", "NVIDIA L40S", 46068, 591, 142, ARCH_ADA, 350.0, pci_device_id=0x26B910DE, cuda_capability=(8, 9)),
    GpuModel(
        "RTX-4090",
        "NVIDIA GeForce RTX 4090",
        24564,
        347,
        128,
        ARCH_ADA,
        450.0,
        ecc=False,
        pci_device_id=0x268410DE,
        cuda_capability=(8, 9),
    ),
    GpuModel(
        "RTX-4080-SUPER",
        "NVIDIA GeForce RTX 4080 SUPER",
        16376,
        306,
        80,
        ARCH_ADA,
        320.0,
        ecc=False,
        pci_device_id=0x270210DE,
        cuda_capability=(8, 9),
    ),
)

_ARCH_WORDS = {
    "blackwell": ARCH_BLACKWELL,
    "hopper": ARCH_HOPPER,
    "ada": ARCH_ADA,
    "ada lovelace": ARCH_ADA,
    "ampere": ARCH_AMPERE,
    "turing": ARCH_TURING,
    "volta": ARCH_VOLTA,
}


def by_key(key: str) -> GpuModel:
    """The catalogue entry for a machine-file ``model`` key (case-insensitive).

    Raises:
        ValueError: unknown key; the message lists the allowed keys.
    """
    for model in CATALOGUE:
        if model.key.lower() == key.lower():
            return model
    allowed = ", ".join(m.key for m in CATALOGUE)
    raise ValueError(f"gpu.model: unknown model {key!r}; allowed: {allowed}")


def by_name(name: str) -> GpuModel | None:
    """The catalogue entry whose NVML name is ``name`` (exact, then loose match), or None."""
    for model in CATALOGUE:
        if model.name == name:
            return model

    def norm(text: str) -> str:  # R450-era drivers drop the "NVIDIA " prefix
        return re.sub(r"^nvidia", "", re.sub(r"[^a-z0-9]", "", text.lower()))

    for model in CATALOGUE:
        if norm(model.name) == norm(name):
            return model
    return None


def arch_from_text(text: str | None, name: str = "") -> int:
    """An ``NVML_DEVICE_ARCH_*`` from nvidia-smi's "Product Architecture" or the product name."""
    if text:
        arch = _ARCH_WORDS.get(text.strip().lower())
        if arch is not None:
            return arch
    model = by_name(name)
    if model is not None:
        return model.arch
    low = name.lower()
    for pattern, arch in (
        (r"\b(b\d{3}|gb\d{3}|rtx pro 6000 blackwell|rtx 50\d0)\b", ARCH_BLACKWELL),
        (r"\b(h\d{3}|gh\d{3})\b", ARCH_HOPPER),
        (r"\b(l\d{1,2}s?|rtx 40\d0|rtx \d000 ada)\b", ARCH_ADA),
        (r"\b(a\d{1,3}|rtx 30\d0)\b", ARCH_AMPERE),
        (r"\b(t4|rtx 20\d0|quadro rtx)\b", ARCH_TURING),
        (r"\b(v100)\b", ARCH_VOLTA),
    ):
        if re.search(pattern, low):
            return arch
    return ARCH_UNKNOWN


#: SMs of a one-slice compute instance by architecture (A100/A30: 14; H100/H200: 16), for unknown products.
ONE_SLICE_SMS = {ARCH_AMPERE: 14, ARCH_HOPPER: 16, ARCH_BLACKWELL: 16}


def slices_from_sms(sm_count: int, one_slice_sm: int) -> int:
    """GPU (compute) slices of an instance from its SMs: the nearest of 1, 2, 3, 4, 7.

    A 3-slice instance has a little under 4 one-slice instances' SMs on Hopper
    (60 vs 4×16), so the 3/4 boundary sits at 3.9 units.
    """
    units = sm_count / max(one_slice_sm, 1)
    for limit, slices in ((1.5, 1), (2.5, 2), (3.9, 3), (5.5, 4)):
        if units < limit:
            return slices
    return 7


def infer_profile(
    model: GpuModel | None,
    sm_count: int,
    memory_mib: int,
    gpu_memory_mib: int,
    one_slice_sm: int | None = None,
    gpu_name: str = "",
) -> MigProfile:
    """The GPU instance profile with this SM count and memory, as ``nvidia-smi -L`` names it.

    Args:
        model: catalogue entry of the parent GPU, or None for an unknown product.
        sm_count: SMs of the GPU instance.
        memory_mib: GPU instance memory, MiB.
        gpu_memory_mib: total memory of the parent GPU, MiB.
        one_slice_sm: SMs of a one-slice instance on this product (unknown products).
        gpu_name: the product name; a ``NNGB`` in it is the memory the profile names divide.

    Returns:
        The closest catalogue profile (memory first, then SM count); for unknown products a
        profile named ``<g>g.<GB>gb`` with ``g`` from the SMs and ``GB`` = the product's
        memory × eighths of memory slices, rounded half up.
    """
    if model is not None and model.mig_profiles:
        plain = [p for p in model.mig_profiles if "+" not in p.name]
        return min(
            plain,
            key=lambda p: (
                abs(p.memory_mib - memory_mib) > 256,
                abs(p.sm_count - sm_count),
                abs(p.memory_mib - memory_mib),
            ),
        )
    mem_slices = max(1, round(memory_mib * 8 / max(gpu_memory_mib, 1)))
    named = re.search(r"(\d+)\s*GB", gpu_name, flags=re.I)
    total_gb = int(named.group(1)) if named else int(gpu_memory_mib / 1024 + 0.5)
    mem_gb = max(1, int(total_gb * mem_slices / 8 + 0.5))
    slices = slices_from_sms(sm_count, one_slice_sm) if one_slice_sm else min(7, mem_slices)
    return MigProfile(f"{slices}g.{mem_gb}gb", slices, memory_mib, sm_count, -1)
