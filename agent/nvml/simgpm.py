"""GPM (GPU Performance Monitoring) on a simulated machine: samples, MIG samples and metrics.

:class:`GpmModel` is a part :class:`~labgang.agent.nvml.simulated.SimulatedNvml` holds. GPM answers
only where the model supports it (Hopper+), per GPU instance for MIG, with per-metric return codes;
samples closer than :data:`GPM_MIN_INTERVAL_S` give a per-metric ``INVALID_ARGUMENT``. Live
processes' activity (:mod:`labgang.agent.nvml.simprocs`) wins over the machine file's readings.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml
from labgang.agent.nvml.simdevices import SimDevices, fail
from labgang.agent.nvml.simprocs import Activity

GPM_MIN_INTERVAL_S = 0.1
_KNOWN_GPM_METRICS = set(range(1, 14)) | {20, 21} | set(range(30, 38)) | set(range(40, 48)) | {50, 51, 60, 61}


class GpmModel:
    """GPM samples of a simulated machine and pynvml's GPM functions over its readings.

    Args:
        devices: the machine's devices (handle look-up, the checks of every call).
        clock: monotonic seconds, stamped on each sample (the backend's ``labgang_clock``).
        activity: what a device's live processes do, by UUID (None: none; the machine file's
            readings apply), e.g. :meth:`~labgang.agent.nvml.simprocs.ProcessModel.labgang_activity`.
    """

    def __init__(
        self, devices: SimDevices, clock: Callable[[], float], activity: Callable[[str], Activity | None]
    ) -> None:
        self._devices = devices
        self._clock = clock
        self._activity = activity
        # sample address -> (what it sampled, when, (graphics, SM active, SM occupancy) %), None before filled
        self.samples: dict[int, tuple[Any, float, tuple[float, float, float]] | None] = {}
        self._sample_refs: dict[int, Any] = {}  # keeps each allocated ctypes sample alive

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        """``c_nvmlGpmSupport_t``; ``isSupportedDevice`` only on Hopper and later."""
        gpu, _ = self._devices.device("nvmlGpmQueryDeviceSupport", handle)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = 1 if gpu.gpm else 0
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new ``c_nvmlGpmSample_t`` (a real ctypes pointer, tracked by address)."""
        self._devices.enter("nvmlGpmSampleAlloc")
        sample = pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())
        address = ctypes.addressof(sample.contents)
        self.samples[address] = None
        self._sample_refs[address] = sample
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Forget a sample; unknown samples are ``INVALID_ARGUMENT``."""
        self._devices.enter("nvmlGpmSampleFree")
        address = self._address(sample)
        self.samples.pop(address, None)
        self._sample_refs.pop(address, None)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        """Fill a sample of a whole GPU.

        ``NOT_SUPPORTED`` without GPM or on MIG handles (use ``nvmlGpmMigSampleGet``).
        """
        gpu, mig = self._devices.device("nvmlGpmSampleGet", handle)
        if not gpu.gpm or mig is not None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        util = gpu.utilization_gpu_pct.peek()
        values = (float(util or 0.0), float(gpu.sm_active_pct.next() or 0.0), float(gpu.sm_occupancy_pct.next() or 0.0))
        live = self._activity(gpu.uuid)
        if live is not None:
            values = (live.util_pct, live.sm_active_pct, min(values[2], live.sm_active_pct))
        self.samples[self._address(sample)] = (("gpu", gpu.index), self._clock(), values)
        return sample

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: int, sample: Any) -> Any:
        """A sample of one GPU instance, taken through its parent GPU's handle."""
        gpu, mig = self._devices.device("nvmlGpmMigSampleGet", handle)
        if not gpu.gpm or mig is not None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        members = [m for m in gpu.mig_devices if m.gi_id == int(gpu_instance_id)]
        if not gpu.mig_current or not members:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        first = members[0]
        values = (0.0, float(first.sm_active_pct.next() or 0.0), float(first.sm_occupancy_pct.next() or 0.0))
        readings = [a for m in members if (a := self._activity(m.uuid)) is not None]
        if readings:
            sm = max(a.sm_active_pct for a in readings)
            values = (0.0, sm, min(values[2], sm))
        self.samples[self._address(sample)] = (("gi", gpu.index, int(gpu_instance_id)), self._clock(), values)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """Fill ``request.metrics[:numMetrics]``; each metric gets its own ``nvmlReturn``."""
        self._devices.enter("nvmlGpmMetricsGet")
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self.samples.get(self._address(request.sample1))
        second = self.samples.get(self._address(request.sample2))
        if first is None or second is None or first[0] != second[0]:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        assert first is not None and second is not None
        too_close = second[1] - first[1] < GPM_MIN_INTERVAL_S
        for i in range(int(request.numMetrics)):
            metric = request.metrics[i]
            metric_id = int(metric.metricId)
            if metric_id not in _KNOWN_GPM_METRICS:
                metric.nvmlReturn, metric.value = pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0
            elif too_close:
                metric.nvmlReturn, metric.value = pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0
            else:
                value = {
                    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: second[2][0],
                    pynvml.NVML_GPM_METRIC_SM_UTIL: second[2][1],
                    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: second[2][2],
                }.get(metric_id, 0.0)
                metric.nvmlReturn, metric.value = pynvml.NVML_SUCCESS, value
        return request

    def _address(self, sample: Any) -> int:
        try:
            return ctypes.addressof(sample.contents)
        except (AttributeError, ValueError, TypeError):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            raise
