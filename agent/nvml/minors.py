"""GPU minor numbers: which ``/dev/nvidiaN`` is which GPU (for the device fence, ``agent/confine/``)."""

from __future__ import annotations

from labgang.agent.inventory import Unavailable
from labgang.agent.nvml.backend import NvmlBackend
from labgang.agent.nvml.query import query


def gpu_minor_numbers(backend: NvmlBackend) -> dict[str, int]:
    """GPU UUID → minor number N of its ``/dev/nvidiaN`` (``nvmlDeviceGetMinorNumber``).

    A GPU whose UUID or minor number NVML cannot give is left out (its ranks then cannot be
    confined, and the confiner says so); MIG devices have no minor of their own.
    """
    found: dict[str, int] = {}
    count = query(backend, "nvmlDeviceGetCount")
    if not isinstance(count, int):
        return found
    for index in range(count):
        handle = query(backend, "nvmlDeviceGetHandleByIndex", index)
        if isinstance(handle, Unavailable):
            continue
        uuid = query(backend, "nvmlDeviceGetUUID", handle)
        minor = query(backend, "nvmlDeviceGetMinorNumber", handle)
        if isinstance(uuid, str) and isinstance(minor, int) and not isinstance(minor, bool):
            found[uuid] = minor
    return found
