"""The thresholds every pitfall detector reads (:class:`PitfallThresholds`), from ``[pitfalls]`` or defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from labgang.agent import tomlfile


@dataclass(frozen=True, slots=True)
class PitfallThresholds:
    """Thresholds of every detector. Defaults suit a lab of shared 8-GPU servers.

    Attributes:
        busy_util_pct: ``utilization.gpu`` at or above which a GPU counts as kernel-busy (%).
        sm_idle_pct: GPM SM activity below which the SMs count as idle (%).
        idle_activity_pct: device activity below which a sample counts as idle (%).
        idle_after_s: an allocated device idle this long is reported (seconds).
        allocation_rate_min_pct: busy device-time over allocated device-time below which the
            cluster's allocation rate is reported (%).
        min_allocated_s: allocated device-time needed before the rate is judged (seconds).
        history_s: how much per-device history the tracker keeps (seconds).
        no_process_after_s: a running job's device with no process after this long is reported
            (seconds since the job started).
        memory_pressure_pct: memory used over total on a shared device at or above which it is
            reported (%).
        shared_min_processes: processes on one device that make it "shared".
    """

    busy_util_pct: float = 80.0
    sm_idle_pct: float = 25.0
    idle_activity_pct: float = 5.0
    idle_after_s: float = 600.0
    allocation_rate_min_pct: float = 50.0
    min_allocated_s: float = 600.0
    history_s: float = 3600.0
    no_process_after_s: float = 120.0
    memory_pressure_pct: float = 90.0
    shared_min_processes: int = 2

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"pitfalls.{f.name}: expected a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"pitfalls.{f.name}: must be >= 0, got {value!r}")
            if f.name.endswith("_pct") and value > 100:
                raise ValueError(f"pitfalls.{f.name}: a percentage in 0..100, got {value!r}")
        if self.shared_min_processes < 2 or int(self.shared_min_processes) != self.shared_min_processes:
            raise ValueError(f"pitfalls.shared_min_processes: an integer >= 2, got {self.shared_min_processes!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PitfallThresholds:
        """Build from a mapping such as the ``[pitfalls]`` table of ``cluster.toml``.

        Raises:
            ValueError: an unknown key (the message lists the allowed ones) or a bad value.
        """
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(f"pitfalls.{unknown[0]}: unknown threshold; allowed: {', '.join(allowed)}")
        return cls(**dict(data))

    @classmethod
    def from_toml(cls, path: str | Path, table: str = "pitfalls") -> PitfallThresholds:
        """Read the ``[pitfalls]`` table of a TOML file; a file without it gives the defaults.

        Raises:
            TomlFileError: (a ValueError) the file is missing, unreadable, not UTF-8 or not TOML.
            ValueError: a bad threshold (see :meth:`from_mapping`).
        """
        doc = tomlfile.read_toml(path)
        section = doc.get(table, {})
        if not isinstance(section, Mapping):
            raise ValueError(f"{path}: [{table}] must be a table")
        return cls.from_mapping(section)
