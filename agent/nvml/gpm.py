"""GPM (GPU Performance Monitoring) SM activity with a cached previous sample.

NVML computes GPM metrics from two samples taken at least 100 ms apart
(nvml.h, GPM group: ``nvmlGpmSampleGet``, ``nvmlGpmMigSampleGet`` per GPU instance,
``nvmlGpmMetricsGet``). To keep a poll cheap, the sampler keeps each device's previous
sample: a read takes one new sample and measures the window since the last read. Only
the first read of a device (or one after a window longer than 10 minutes) seeds a
sample and waits once, for all seeded devices together, until 100 ms have passed.
Reads closer than 100 ms to the previous one re-serve the previous result.

GPU instance ids are reused after reconfiguration, so a MIG target's key includes the
UUIDs of its member devices (docs/nvml.md §5.3).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from labgang.agent.inventory import Unavailable
from labgang.agent.nvml.backend import NvmlBackend, VirtualTime
from labgang.agent.nvml.query import query, reason_for

MIN_INTERVAL_S = 0.1
MAX_WINDOW_S = 600.0

SmActivity = tuple["float | Unavailable", "float | Unavailable"]


@dataclass(frozen=True)
class GpmTarget:
    """One thing to measure.

    Attributes:
        key: stable identity (GPU UUID, or (parent UUID, GI id, member UUIDs) for a GPU instance).
        handle: the GPU handle (the parent's for a GPU instance).
        gi_id: GPU instance id for ``nvmlGpmMigSampleGet``, or None for a whole GPU.
    """

    key: Hashable
    handle: Any = field(compare=False)
    gi_id: int | None = None


@dataclass
class _State:
    sample: Any
    taken_at: float
    result: SmActivity | None = None


class GpmSampler:
    """Measures GPM ``SM_UTIL`` and ``SM_OCCUPANCY`` (percent) across reads.

    Args:
        clock: monotonic clock in seconds (default: the backend's ``labgang_clock`` or
            ``time.monotonic``).
        sleep: sleep function in seconds (default: the backend's ``labgang_sleep`` or
            ``time.sleep``).
    """

    def __init__(self, clock: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None):
        self._clock = clock
        self._sleep = sleep
        self._states: dict[Hashable, _State] = {}
        self._lock = threading.Lock()

    def measure(self, backend: NvmlBackend, targets: list[GpmTarget]) -> dict[Hashable, SmActivity]:
        """Return ``{key: (sm_active_pct, sm_occupancy_pct)}`` for every target.

        Each value is a float percent or an :class:`Unavailable` (sample or metric error).
        Samples of keys not in ``targets`` are freed. Calls from several threads take turns.
        """
        with self._lock:
            return self._measure(backend, targets)

    def _measure(self, backend: NvmlBackend, targets: list[GpmTarget]) -> dict[Hashable, SmActivity]:
        clock: Callable[[], float] = time.monotonic
        sleep: Callable[[float], None] = time.sleep
        if isinstance(backend, VirtualTime):  # simulated and replayed NVML: their own (maybe virtual) time
            clock, sleep = backend.labgang_clock, backend.labgang_sleep
        clock = self._clock or clock
        sleep = self._sleep or sleep
        out: dict[Hashable, SmActivity] = {}
        wanted = {t.key for t in targets}
        for key in [k for k in self._states if k not in wanted]:
            self._free(backend, self._states.pop(key).sample)

        seeded_at: float | None = None
        for t in targets:
            state = self._states.get(t.key)
            if state is not None and clock() - state.taken_at <= MAX_WINDOW_S:
                continue
            if state is not None:
                self._free(backend, state.sample)
                del self._states[t.key]
            sample = self._take(backend, t)
            if isinstance(sample, Unavailable):
                out[t.key] = (sample, sample)
                continue
            seeded_at = clock()
            self._states[t.key] = _State(sample, seeded_at)
        if seeded_at is not None:
            wait = seeded_at + MIN_INTERVAL_S - clock()
            if wait > 0:
                sleep(wait)

        for t in targets:
            if t.key in out:
                continue
            state = self._states[t.key]
            if clock() - state.taken_at < MIN_INTERVAL_S and state.result is not None:
                out[t.key] = state.result
                continue
            sample = self._take(backend, t)
            if isinstance(sample, Unavailable):
                out[t.key] = (sample, sample)
                continue
            taken_at = clock()
            result = self._metrics(backend, state.sample, sample)
            self._free(backend, state.sample)
            self._states[t.key] = _State(sample, taken_at, result)
            out[t.key] = result
        return out

    def close(self, backend: NvmlBackend) -> None:
        """Free every kept sample (call before ``nvmlShutdown``)."""
        with self._lock:
            self._close(backend)

    def _close(self, backend: NvmlBackend) -> None:
        for state in self._states.values():
            self._free(backend, state.sample)
        self._states.clear()

    @staticmethod
    def _take(backend: NvmlBackend, target: GpmTarget) -> Any:
        sample = query(backend, "nvmlGpmSampleAlloc")
        if isinstance(sample, Unavailable):
            return sample
        if target.gi_id is None:
            got = query(backend, "nvmlGpmSampleGet", target.handle, sample)
        else:
            got = query(backend, "nvmlGpmMigSampleGet", target.handle, target.gi_id, sample)
        if isinstance(got, Unavailable):
            GpmSampler._free(backend, sample)
            return got
        return sample

    @staticmethod
    def _free(backend: NvmlBackend, sample: Any) -> None:
        query(backend, "nvmlGpmSampleFree", sample)

    @staticmethod
    def _metrics(backend: NvmlBackend, first: Any, second: Any) -> SmActivity:
        request = backend.c_nvmlGpmMetricsGet_t()
        request.version = backend.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 2
        request.sample1 = first
        request.sample2 = second
        request.metrics[0].metricId = backend.NVML_GPM_METRIC_SM_UTIL
        request.metrics[1].metricId = backend.NVML_GPM_METRIC_SM_OCCUPANCY
        answer = query(backend, "nvmlGpmMetricsGet", request)
        if isinstance(answer, Unavailable):
            return (answer, answer)
        values: list[float | Unavailable] = []
        for i in range(2):
            metric = answer.metrics[i]
            code = int(metric.nvmlReturn)
            values.append(Unavailable(reason_for(code), code) if code else round(float(metric.value), 2))
        return (values[0], values[1])


_shared: weakref.WeakKeyDictionary[NvmlBackend, GpmSampler] = weakref.WeakKeyDictionary()


def sampler_for(backend: NvmlBackend) -> GpmSampler:
    """The sampler kept for ``backend`` across reads (one per backend object)."""
    sampler = _shared.get(backend)
    if sampler is None:
        sampler = GpmSampler()
        _shared[backend] = sampler
    return sampler


__all__ = ["MIN_INTERVAL_S", "GpmSampler", "GpmTarget", "sampler_for"]
