"""Turn real ``nvidia-smi`` output into a :class:`~labgang.agent.nvml.machine.SimMachine`.

Reads, detected from content, not file names:

* ``nvidia-smi -q -x`` XML (``<nvidia_smi_log>``);
* ``nvidia-smi -q`` text (``==============NVSMI LOG==============``), an indented tree;
* ``nvidia-smi -L`` listings (``GPU 0: NAME (UUID: GPU-…)`` / ``  MIG 1g.10gb Device 0: (UUID: MIG-…)``);
* transcripts holding several commands' outputs (the first ``-q`` block and the first
  ``-L`` block are used together: ``-L`` gives MIG UUIDs and profile names, ``-q`` the rest).

MIG devices in ``-q`` output carry no UUID or profile name: the profile is inferred from
SM count and memory as ``nvidia-smi -L`` would print it (``models.infer_profile``) and the
UUID is derived from the parent UUID and GI/CI ids (``machine.derived_mig_uuid``).

This module holds the format-neutral records every reader fills (:class:`Capture`), the value
parsers they share, and :func:`build_machine`. One reader per format: ``smi_table.py`` (the
default table), ``smi_qtext.py`` (``-q``), ``smi_xml.py`` (``-q -x``), ``smi_list.py`` (``-L``);
``formats.py`` detects which one a file needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from labgang.agent.nvml import models
from labgang.agent.nvml.machine import (
    Script,
    SimGpu,
    SimMachine,
    SimMigDevice,
    SimProcess,
    derived_gpu_uuid,
    derived_mig_uuid,
    mig_device,
)

#: clock event reason text (``-q``) / XML tag -> ``nvmlClocksEventReasons`` bit.
CLOCK_REASON_BITS = {
    "idle": 0x1,
    "gpu_idle": 0x1,
    "applications clocks setting": 0x2,
    "applications_clocks_setting": 0x2,
    "sw power cap": 0x4,
    "sw_power_cap": 0x4,
    "hw slowdown": 0x8,
    "hw_slowdown": 0x8,
    "sync boost": 0x10,
    "sync_boost": 0x10,
    "sw thermal slowdown": 0x20,
    "sw_thermal_slowdown": 0x20,
    "hw thermal slowdown": 0x40,
    "hw_thermal_slowdown": 0x40,
    "hw power brake slowdown": 0x80,
    "hw_power_brake_slowdown": 0x80,
    "display clock setting": 0x100,
    "display_clocks_setting": 0x100,
    "display_clock_setting": 0x100,
}


# --------------------------------------------------------------------------- format-neutral records


@dataclass
class MigRecord:
    """One MIG device as a capture shows it (ids, SMs, memory MiB; UUID/profile from ``-L``)."""

    index: int
    gi_id: int | None = None
    ci_id: int | None = None
    sm_count: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: float | None = None
    uuid: str | None = None
    profile: str | None = None


@dataclass
class GpuRecord:
    """One GPU as a capture shows it (memory MiB, power W, temperature °C, percent)."""

    name: str = ""
    uuid: str | None = None
    bus_id: str | None = None
    pci_device_id: int | None = None
    pci_sub_system_id: int | None = None
    arch_text: str | None = None
    memory_total_mib: int | None = None
    memory_reserved_mib: int | None = None
    memory_used_mib: float | None = None
    util_gpu: float | None = None
    util_mem: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clock_mask: int = 0
    ecc_enabled: bool | None = None
    ecc_uncorrected: int | None = None
    mig_current: bool | None = None
    mig_pending: bool | None = None
    migs: list[MigRecord] = field(default_factory=list)
    processes: list[SimProcess] = field(default_factory=list)


@dataclass
class Capture:
    """The GPUs of one ``nvidia-smi`` output plus driver and CUDA versions."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuRecord] = field(default_factory=list)


def number(text: str | None) -> float | None:
    """The leading number of a field (``"81559 MiB"`` -> 81559.0), or None (absent, ``N/A``)."""
    if text is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", text)
    return float(m.group(1)) if m else None


def integer(text: str | None) -> int | None:
    """:func:`number` truncated to an int, or None."""
    value = number(text)
    return None if value is None else int(value)


def pci_id(text: str | None) -> int | None:
    """A 32-bit PCI id as ``-q`` (``0x233510DE``) or ``-q -x`` (``233510DE``) prints it, or None."""
    if text is None or not re.fullmatch(r"(?:0[xX])?[0-9A-Fa-f]{1,8}", text.strip()):
        return None
    return int(text.strip(), 16)


def mode_enabled(text: str | None) -> bool | None:
    """``Enabled`` -> True, ``Disabled`` -> False (a pending ``*`` ignored), anything else None."""
    if text is None:
        return None
    low = text.strip().lower().rstrip("*")
    if low == "enabled":
        return True
    if low == "disabled":
        return False
    return None


def _cuda_int(text: str | None) -> int | None:
    if not text:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", text)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else None


# --------------------------------------------------------------------------- merge and build


def merge_list(cap: Capture, listing: Capture) -> None:
    """Copy UUIDs and MIG profile names from an ``-L`` listing into a ``-q`` capture (same order)."""
    for g, lg in zip(cap.gpus, listing.gpus, strict=False):  # a short listing fills what it has
        g.uuid = g.uuid or lg.uuid
        by_index = {m.index: m for m in lg.migs}
        for m in g.migs:
            lm = by_index.get(m.index)
            if lm is not None:
                m.uuid, m.profile = lm.uuid, lm.profile


def build_machine(cap: Capture, hostname: str, source: str) -> SimMachine:
    """Build the simulated machine from a format-neutral capture.

    Raises:
        ValueError: the capture holds no GPU.
    """
    if not cap.gpus:
        raise ValueError(f"{source}: no GPU found in this nvidia-smi output")
    driver = cap.driver_version or "550.54.15"
    machine = SimMachine(
        hostname=hostname,
        driver_version=driver,
        cuda_driver_version=_cuda_int(cap.cuda_version) or 12040,
        source=source,
    )
    for index, g in enumerate(cap.gpus):
        machine.gpus.append(_build_gpu(index, g, hostname))
    return machine


def _name_memory_mib(name: str) -> int | None:
    m = re.search(r"(\d+)\s*GB", name, flags=re.I)
    return int(m.group(1)) * 1024 if m else None


def _build_gpu(index: int, g: GpuRecord, hostname: str) -> SimGpu:
    model = models.by_name(g.name)
    arch = models.arch_from_text(g.arch_text, g.name)
    uuid = g.uuid or derived_gpu_uuid(hostname, index, g.bus_id or "", g.name)
    total = (
        g.memory_total_mib
        if g.memory_total_mib is not None
        else (model.memory_total_mib if model else _name_memory_mib(g.name))
    )
    gpu = SimGpu(
        index=index,
        uuid=uuid,
        name=g.name,
        pci_bus_id=g.bus_id or f"00000000:{index + 1:02X}:00.0",
        memory_total_mib=total,
        memory_reserved_mib=g.memory_reserved_mib
        if g.memory_reserved_mib is not None
        else (model.memory_reserved_mib if model else 0),
        memory_used_mib=g.memory_used_mib
        if g.memory_used_mib is not None
        else (0.0 if g.memory_total_mib is None else None),
        sm_count=model.sm_count if model else 0,
        arch=arch,
        gpm=model.gpm if model else arch in (models.ARCH_HOPPER, models.ARCH_BLACKWELL),
        mig_capable=g.mig_current is not None or (model.mig_capable if model else False),
        mig_current=bool(g.mig_current),
        mig_pending=bool(g.mig_pending if g.mig_pending is not None else g.mig_current),
        temperature_c=Script(g.temperature_c),
        power_w=Script(g.power_w),
        power_limit_w=g.power_limit_w if g.power_limit_w is not None else (model.power_limit_w if model else None),
        ecc=bool(g.ecc_enabled) if g.ecc_enabled is not None else (model.ecc if model else False),
        ecc_volatile_uncorrected=g.ecc_uncorrected or 0,
        utilization_gpu_pct=Script(g.util_gpu if g.util_gpu is not None else 0),
        utilization_memory_pct=Script(g.util_mem if g.util_mem is not None else 0),
        clock_event_mask=g.clock_mask,
        pci_device_id=g.pci_device_id
        if g.pci_device_id is not None
        else (model.pci_device_id if model else 0x000010DE),
        pci_sub_system_id=g.pci_sub_system_id or 0,
        cuda_capability=model.cuda_capability if model else (0, 0),
        processes=list(g.processes),
    )
    if gpu.mig_current:
        gpu.mig_devices = _build_migs(model, gpu, g.migs)
    return gpu


def _build_migs(model: models.GpuModel | None, gpu: SimGpu, recs: list[MigRecord]) -> list[SimMigDevice]:
    one_slice_sm = None
    if model is not None:
        one = next((p for p in model.mig_profiles if p.slices == 1 and "+" not in p.name), None)
        one_slice_sm = one.sm_count if one else None
    if one_slice_sm is None:
        known = [r.sm_count for r in recs if r.sm_count]
        one_slice_sm = models.ONE_SLICE_SMS.get(gpu.arch) or (min(known) if known else 1)
    next_gi = 1
    by_gi: dict[int, list[MigRecord]] = {}
    for r in recs:
        if r.gi_id is None:  # an -L listing: assign ids, CI splits of one GI follow each other
            split = models.ci_slices(r.profile or "")
            prev = recs[recs.index(r) - 1] if recs.index(r) > 0 else None
            if (
                split is not None
                and prev is not None
                and prev.profile
                and models.ci_slices(prev.profile) is not None
                and models.gi_profile_name(prev.profile) == models.gi_profile_name(r.profile or "")
                and prev.gi_id is not None
            ):
                r.gi_id, r.ci_id = prev.gi_id, (prev.ci_id or 0) + 1
            else:
                r.gi_id, r.ci_id = next_gi, 0
                next_gi += 1
        else:
            next_gi = max(next_gi, r.gi_id + 1)
        by_gi.setdefault(r.gi_id, []).append(r)
    out: list[SimMigDevice] = []
    for r in recs:
        assert r.gi_id is not None
        ci = r.ci_id if r.ci_id is not None else 0
        uuid = r.uuid or derived_mig_uuid(gpu.uuid, r.gi_id, ci)
        profile = r.profile or _infer_name(model, gpu, r, by_gi[r.gi_id], one_slice_sm)
        gi_prof = model.profile(profile) if model else None
        mem_total = r.memory_total_mib
        if mem_total is None:
            mem_total = gi_prof.memory_mib if gi_prof else (_name_memory_mib(profile.rsplit(".", 1)[-1].upper()) or 0)
        sm = r.sm_count
        if sm is None and gi_prof is None:
            ci_sl = models.ci_slices(profile) or int(models.gi_profile_name(profile).split("g", 1)[0])
            sm = ci_sl * one_slice_sm
        dev = mig_device(
            model if gi_prof else None, r.index, uuid, profile, r.gi_id, ci, sm, mem_total, r.memory_used_mib or 0.0
        )
        out.append(dev)
    return out


def _infer_name(
    model: models.GpuModel | None, gpu: SimGpu, rec: MigRecord, members: list[MigRecord], one_slice_sm: int
) -> str:
    """The ``nvidia-smi -L`` profile name of a MIG device seen only in ``-q`` output."""
    mem = rec.memory_total_mib or 0
    gpu_mem = gpu.memory_total_mib or mem * 8
    if len(members) == 1:
        return models.infer_profile(model, rec.sm_count or 0, mem, gpu_mem, one_slice_sm, gpu.name).name
    ci_slices = [max(1, round((m.sm_count or one_slice_sm) / one_slice_sm)) for m in members]
    need = sum(ci_slices)
    gi_name = None
    if model is not None:
        fits = [
            p for p in model.mig_profiles if "+" not in p.name and abs(p.memory_mib - mem) <= 256 and p.slices >= need
        ]
        if fits:
            gi_name = min(fits, key=lambda p: p.slices).name
    if gi_name is None:
        gi_name = models.infer_profile(None, need * one_slice_sm, mem, gpu_mem, one_slice_sm, gpu.name).name
    own = max(1, round((rec.sm_count or one_slice_sm) / one_slice_sm))
    return f"{own}c.{gi_name}"


__all__ = [
    "CLOCK_REASON_BITS",
    "Capture",
    "GpuRecord",
    "MigRecord",
    "build_machine",
    "integer",
    "merge_list",
    "mode_enabled",
    "number",
]
