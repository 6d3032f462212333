"""The rank supervisor: start, stop and re-adopt gang ranks as real processes, as the submitting user.

Public API (the contract in prompts/contracts.md, "Supervisor")::

    from labgang.agent.supervisor import LaunchSpec, RankState, RankStatus, RankEvent, Supervisor

    sup = Supervisor(state_dir, device_pids=inventory_device_pids, allowed_uids=None, allow_root=False)
    sup.recover()                        # -> list[RankEvent]; re-adopt ranks after an agent restart
    sup.launch(spec)                     # -> RankStatus; idempotent per (job_id, rank)
    sup.stop_job(job_id, grace=None)     # -> list[RankStatus]; SIGTERM group + descendants, grace, SIGKILL
    sup.signal_job(job_id, signum)       # -> int; processes signalled
    sup.tick()                           # -> list[RankEvent]; timed arrows, exits, "gone"
    sup.awaiting_devices()               # -> float | None; a rank waits for a fresh NVML read (since when)
    sup.next_deadline()                  # -> float | None; when the next grace/warning arrow fires
    sup.watched_processes()              # -> [(pid, start ticks)] whose exit should wake tick()
    sup.ranks()                          # -> list[RankStatus]
    sup.log_path(job_id, rank)           # -> Path
    sup.foreign_processes(inventory)     # -> list[ForeignProcess]
    pick_free_port()                     # -> int

See ``supervisor.py`` for the design (small parent per rank, subreaper, journal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import SupervisorConfig
    from .errors import InvalidSpec, InvalidTransition, LaunchRefused, RankConflict, SupervisorError, UnknownJob
    from .exitwatch import ExitWatcher
    from .foreign import ForeignProcess
    from .ports import pick_free_port
    from .ranks import DeviceReading
    from .spec import LaunchSpec, ShareGrant
    from .states import RankState
    from .status import RankEvent, RankStatus
    from .supervisor import Supervisor

_WHERE = {
    "SupervisorConfig": "config",
    "InvalidSpec": "errors",
    "InvalidTransition": "errors",
    "LaunchRefused": "errors",
    "RankConflict": "errors",
    "SupervisorError": "errors",
    "UnknownJob": "errors",
    "ExitWatcher": "exitwatch",
    "ForeignProcess": "foreign",
    "pick_free_port": "ports",
    "DeviceReading": "ranks",
    "LaunchSpec": "spec",
    "ShareGrant": "spec",
    "RankState": "states",
    "RankEvent": "status",
    "RankStatus": "status",
    "Supervisor": "supervisor",
}
"""Each public name's module, imported on first use: the launch contract (``spec``), the rank
states and errors import without the supervisor's OS code (the coordinator, simulator and TUI
use those; only the agent daemon needs the rest)."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DeviceReading",
    "ExitWatcher",
    "ForeignProcess",
    "InvalidSpec",
    "InvalidTransition",
    "LaunchRefused",
    "LaunchSpec",
    "RankConflict",
    "RankEvent",
    "RankState",
    "RankStatus",
    "ShareGrant",
    "Supervisor",
    "SupervisorConfig",
    "SupervisorError",
    "UnknownJob",
    "pick_free_port",
]
