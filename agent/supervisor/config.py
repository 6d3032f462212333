"""The supervisor's part of the agent config (``[supervisor]`` in ``agent.toml``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labgang.agent.confine.decide import CONFINE_SETTINGS

from .foreign import ForeignProcess

FOREIGN_POLICIES = ("block", "report")
DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024
MAX_SPARE_SHIMS = 64


@dataclass(frozen=True)
class SupervisorConfig:
    """Policy knobs of the supervisor.

    Attributes:
        foreign: ``"block"`` (default): a device with a foreign process is busy and offered to no job;
            ``"report"``: foreign processes are only reported.
        allowed_uids: uids a root agent may start ranks for; ``None`` = every non-root user.
        allow_root: whether a job may run as root (uid 0).
        log_max_bytes: cap of one rank log file in bytes (>= 1024); past it the log rotates to ``.1``.
        spare_shims: most ranks' small parents kept started ahead, idle, so that a launch skips
            the Python start-up of its small parent (about 20-30 ms of CPU each); the agent keeps
            ``min(spare_shims, allocatable devices)`` of them. 0 turns it off.
        confine: ``"auto"`` (default): each rank in a cgroup that lets it open only its own GPUs,
            where the host allows it, else said once at start-up; ``"off"``; ``"required"``: the
            agent refuses to start without it (docs/security.md).
        cgroup_root: a delegated, writable cgroup v2 folder for the ranks' cgroups; None: a
            ``labgang.ranks`` folder in the agent's own cgroup.
    """

    foreign: str = "block"
    allowed_uids: frozenset[int] | None = None
    allow_root: bool = False
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    spare_shims: int = 8
    confine: str = "auto"
    cgroup_root: str | None = None

    def __post_init__(self) -> None:
        if self.foreign not in FOREIGN_POLICIES:
            raise ValueError(f"foreign: {self.foreign!r} is not a policy (allowed: {', '.join(FOREIGN_POLICIES)})")
        if self.allowed_uids is not None:
            uids = frozenset(self.allowed_uids)
            if any(not isinstance(u, int) or isinstance(u, bool) or u < 0 for u in uids):
                raise ValueError(f"allowed_uids: {sorted(uids, key=str)!r} must hold uids (allowed: integers >= 0)")
            object.__setattr__(self, "allowed_uids", uids)
        if not isinstance(self.allow_root, bool):
            raise ValueError(f"allow_root: {self.allow_root!r} is not a boolean (allowed: true, false)")
        if not isinstance(self.log_max_bytes, int) or isinstance(self.log_max_bytes, bool) or self.log_max_bytes < 1024:
            raise ValueError(f"log_max_bytes: {self.log_max_bytes!r} is too small (allowed: integer >= 1024)")
        if (
            not isinstance(self.spare_shims, int)
            or isinstance(self.spare_shims, bool)
            or not 0 <= self.spare_shims <= MAX_SPARE_SHIMS
        ):
            raise ValueError(
                f"spare_shims: {self.spare_shims!r} is not a count of spare small parents "
                f"(allowed: integer 0..{MAX_SPARE_SHIMS})"
            )
        if self.confine not in CONFINE_SETTINGS:
            raise ValueError(f"confine: {self.confine!r} is not a setting (allowed: {', '.join(CONFINE_SETTINGS)})")
        if self.cgroup_root is not None and (
            not isinstance(self.cgroup_root, str) or not self.cgroup_root.startswith("/")
        ):
            raise ValueError(f"cgroup_root: {self.cgroup_root!r} is not a folder (allowed: an absolute path)")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SupervisorConfig:
        """Build from a TOML table.

        Raises:
            ValueError: an unknown key, or a bad value, naming the field and the allowed values.
        """
        known = ("foreign", "allowed_uids", "allow_root", "log_max_bytes", "spare_shims", "confine", "cgroup_root")
        for key in data:
            if key not in known:
                raise ValueError(f"{key}: not a supervisor setting (allowed: {', '.join(known)})")
        kwargs = dict(data)
        if kwargs.get("allowed_uids") is not None:
            if not isinstance(kwargs["allowed_uids"], (list, tuple, set, frozenset)):
                raise ValueError(f"allowed_uids: {kwargs['allowed_uids']!r} is not a list (allowed: list of uids)")
            kwargs["allowed_uids"] = frozenset(kwargs["allowed_uids"])
        return cls(**kwargs)

    def blocked_devices(self, foreign: Iterable[ForeignProcess]) -> frozenset[str]:
        """Device UUIDs that count as busy because of foreign processes under this policy."""
        if self.foreign == "report":
            return frozenset()
        return frozenset(p.device for p in foreign)
