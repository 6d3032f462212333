"""The thresholds every pitfall detector reads (:class:`PitfallThresholds`), from ``[pitfalls]`` or defaults."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from labgang.agent import tomlfile


@dataclass(frozen=True, slots=True)
class PitfallThresholds:
    """Thresholds of every detector. Defaults suit a lab of shared 8-GPU servers.

    Attributes:
        busy_util_pct: ``utilization.gpu`` at or above which a GPU counts as kernel-busy (%). 30, not
            80: a real H200 fed one-element kernels from a Python loop read 33-39 % with its SMs
            0.03-0.05 % active (``tests/fixtures/device-h200/run-tiny.json``): a launch-bound job
            never reaches 80 and is exactly the waste this detector names.
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
        shared_card_memory_pct: memory its sharers (``--shards``/``--mps`` jobs) use over a
            shared card's total at or above which the card is reported (%).
        sharer_busy_pct: a sharer counts as busy when one of its processes has at least this
            share of the card's SMs (``nvmlDeviceGetProcessUtilization``), or, where NVML gives
            none, of one CPU core (%).
    """

    busy_util_pct: float = 30.0
    sm_idle_pct: float = 25.0
    idle_activity_pct: float = 5.0
    idle_after_s: float = 600.0
    allocation_rate_min_pct: float = 50.0
    min_allocated_s: float = 600.0
    history_s: float = 3600.0
    no_process_after_s: float = 120.0
    memory_pressure_pct: float = 90.0
    shared_min_processes: int = 2
    shared_card_memory_pct: float = 90.0
    sharer_busy_pct: float = 50.0

    def __post_init__(self) -> None:
        problems = [p for f in fields(self) if (p := _value_problem(f.name, getattr(self, f.name)))]
        if problems:
            raise ValueError("\n".join(problems))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PitfallThresholds:
        """Build from a mapping such as the ``[pitfalls]`` table of ``cluster.toml``.

        Raises:
            ValueError: unknown keys (the message lists the allowed ones) or bad values, one
                line per problem (``pitfalls.<key>: ...; allowed: ...``), all of them at once.
        """
        allowed = [f.name for f in fields(cls)]
        problems = [
            f"pitfalls.{key}: unknown threshold; allowed: {', '.join(allowed)}"
            for key in sorted(set(data) - set(allowed))
        ]
        problems += [p for key in allowed if key in data and (p := _value_problem(key, data[key]))]
        if problems:
            raise ValueError("\n".join(problems))
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


def _value_problem(name: str, value: Any) -> str | None:
    """What is wrong with threshold ``name`` = ``value`` (one line naming it and what it allows), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"pitfalls.{name}: {value!r} is not allowed; allowed: a finite number"
    if name == "shared_min_processes" and (value < 2 or int(value) != value):
        return f"pitfalls.{name}: {value!r} is not allowed; allowed: an integer >= 2"
    if value < 0:
        return f"pitfalls.{name}: {value!r} is out of range; allowed: a number >= 0"
    if name.endswith("_pct") and value > 100:
        return f"pitfalls.{name}: {value!r} is out of range; allowed: a percentage in 0..100"
    return None
