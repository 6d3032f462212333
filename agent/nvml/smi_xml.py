"""``nvidia-smi -q -x`` XML (``<nvidia_smi_log>``), read into a :class:`~labgang.agent.nvml.smi.Capture`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from labgang.agent.nvml.machine import SimProcess
from labgang.agent.nvml.smi import (
    CLOCK_REASON_BITS,
    Capture,
    GpuRecord,
    MigRecord,
    integer,
    mode_enabled,
    number,
    pci_id,
)


def capture_from_xml(text: str) -> Capture:
    """Extract GPUs (and MIG devices, processes) from ``nvidia-smi -q -x`` XML.

    Raises:
        ValueError: the XML is malformed or its root is not ``nvidia_smi_log``.
    """
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text.lstrip("\ufeff"), count=1)
    try:
        root = ET.fromstring(body)  # noqa: S314 - nvidia-smi's own output; the DOCTYPE is stripped above
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi XML: root element is <{root.tag}>, expected <nvidia_smi_log>")

    def t(el: ET.Element, *paths: str) -> str | None:
        for path in paths:
            found = el.find(path)
            if (
                found is not None
                and found.text
                and found.text.strip()
                and not found.text.strip().startswith(("N/A", "[N/A", "Insufficient", "[Insufficient"))
            ):
                return found.text.strip()
        return None

    cap = Capture(driver_version=t(root, "driver_version"), cuda_version=t(root, "cuda_version"))
    for el in root.findall("gpu"):
        g = GpuRecord(
            name=t(el, "product_name") or "",
            uuid=t(el, "uuid"),
            bus_id=t(el, "pci/pci_bus_id") or el.get("id"),
            arch_text=t(el, "product_architecture"),
            pci_device_id=pci_id(t(el, "pci/pci_device_id")),
            pci_sub_system_id=pci_id(t(el, "pci/pci_sub_system_id")),
        )
        g.memory_total_mib = integer(t(el, "fb_memory_usage/total"))
        g.memory_reserved_mib = integer(t(el, "fb_memory_usage/reserved"))
        g.memory_used_mib = number(t(el, "fb_memory_usage/used"))
        g.util_gpu = number(t(el, "utilization/gpu_util"))
        g.util_mem = number(t(el, "utilization/memory_util"))
        g.temperature_c = number(t(el, "temperature/gpu_temp"))
        g.power_w = number(
            t(
                el,
                "gpu_power_readings/power_draw",
                "gpu_power_readings/average_power_draw",
                "gpu_power_readings/instant_power_draw",
                "power_readings/power_draw",
            )
        )
        g.power_limit_w = number(
            t(
                el,
                "gpu_power_readings/current_power_limit",
                "gpu_power_readings/enforced_power_limit",
                "power_readings/enforced_power_limit",
                "power_readings/power_limit",
            )
        )
        for section, prefix in (
            ("clocks_event_reasons", "clocks_event_reason_"),
            ("clocks_throttle_reasons", "clocks_throttle_reason_"),
        ):
            sec = el.find(section)
            if sec is not None:
                for child in sec:
                    if (child.text or "").strip() == "Active":
                        g.clock_mask |= CLOCK_REASON_BITS.get(child.tag.removeprefix(prefix), 0)
                break
        g.ecc_enabled = mode_enabled(t(el, "ecc_mode/current_ecc"))
        g.ecc_uncorrected = integer(
            t(el, "ecc_errors/volatile/dram_uncorrectable", "ecc_errors/volatile/double_bit/total")
        )
        g.mig_current = mode_enabled(t(el, "mig_mode/current_mig"))
        g.mig_pending = mode_enabled(t(el, "mig_mode/pending_mig"))
        for slot, mig in enumerate(el.findall("mig_devices/mig_device")):
            listed = integer(t(mig, "index"))
            g.migs.append(
                MigRecord(
                    index=listed if listed is not None else slot,
                    gi_id=integer(t(mig, "gpu_instance_id")),
                    ci_id=integer(t(mig, "compute_instance_id")),
                    sm_count=integer(t(mig, "device_attributes/shared/multiprocessor_count")),
                    memory_total_mib=integer(t(mig, "fb_memory_usage/total")),
                    memory_used_mib=number(t(mig, "fb_memory_usage/used")),
                )
            )
        for proc in el.findall("processes/process_info"):
            if (t(proc, "type") or "C") == "G":
                continue
            gi, ci = t(proc, "gpu_instance_id"), t(proc, "compute_instance_id")
            used = t(proc, "used_memory")
            g.processes.append(
                SimProcess(
                    int(number(t(proc, "pid")) or 0),
                    number(used) if used else None,
                    integer(gi) if number(gi) is not None else None,
                    integer(ci) if number(ci) is not None else None,
                )
            )
        cap.gpus.append(g)
    return cap
