"""What labgang needs of an NVML backend, as a :class:`typing.Protocol`.

Three things satisfy it: the real ``pynvml`` module (nvidia-ml-py), a
:class:`~labgang.agent.nvml.simulated.SimulatedNvml` or
:class:`~labgang.agent.nvml.recorder.ReplayNvml`, and a
:class:`~labgang.agent.nvml.recorder.Recorder` wrapping one of them. Every NVML *function*
other than init/shutdown is called by name through :func:`labgang.agent.nvml.query.query`
(a backend may lack any of them, as old drivers do), so only the names read directly are
listed here: the lifecycle calls, the error base class and the constants the reader passes
as arguments. nvidia-ml-py ships no type information, so the real module is accepted as is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


class NvmlBackend(Protocol):
    """An initialisable NVML with pynvml's names (see the module docstring)."""

    @property
    def NVMLError(self) -> type[Exception]:
        """Base class of every NVML error; ``.value`` is the ``nvmlReturn_t`` code."""
        ...

    @property
    def NVML_TEMPERATURE_GPU(self) -> int:
        """``nvmlTemperatureSensors_t`` of the GPU die (``nvmlDeviceGetTemperature``)."""
        ...

    @property
    def NVML_MEMORY_ERROR_TYPE_UNCORRECTED(self) -> int:
        """``nvmlMemoryErrorType_t`` for ``nvmlDeviceGetTotalEccErrors``."""
        ...

    @property
    def NVML_VOLATILE_ECC(self) -> int:
        """``nvmlEccCounterType_t`` (since the last driver load) for ``nvmlDeviceGetTotalEccErrors``."""
        ...

    @property
    def nvmlMemory_v2(self) -> int:
        """The struct version ``nvmlDeviceGetMemoryInfo(handle, version=...)`` takes for v2."""
        ...

    @property
    def c_nvmlGpmMetricsGet_t(self) -> Callable[[], Any]:
        """The ctypes struct ``nvmlGpmMetricsGet`` fills (a class; called to make one)."""
        ...

    @property
    def NVML_GPM_METRICS_GET_VERSION(self) -> int:
        """The ``version`` field ``nvmlGpmMetricsGet`` expects."""
        ...

    @property
    def NVML_GPM_METRIC_SM_UTIL(self) -> int:
        """``nvmlGpmMetricId_t`` of SM activity in percent."""
        ...

    @property
    def NVML_GPM_METRIC_SM_OCCUPANCY(self) -> int:
        """``nvmlGpmMetricId_t`` of SM occupancy in percent."""
        ...

    def nvmlInit(self) -> None:
        """Initialise (reference-counted). Raises ``NVMLError`` when NVML cannot start."""
        ...

    def nvmlShutdown(self) -> None:
        """Release one ``nvmlInit``."""
        ...


@runtime_checkable
class VirtualTime(Protocol):
    """A backend with its own time (simulated and replayed NVML): GPM sample spacing waits on it.

    ``labgang_clock()`` gives monotonic seconds; ``labgang_sleep(s)`` waits (or advances a
    virtual clock by) ``s`` seconds.
    """

    labgang_clock: Callable[[], float]
    labgang_sleep: Callable[[float], None]


__all__ = ["NvmlBackend", "VirtualTime"]
