"""Host CPU and memory limits per rank: can this host enforce them, what they are, and the write.

A rank asked for ``-c/--cpus-per-task`` CPUs and ``--mem``/``--mem-per-gpu`` memory
(docs/host-resources.md); the scheduler counts them per node, and here the agent makes the
kernel hold the rank to them through its cgroup v2 folder (``<ranks_dir>/<job>.<rank>``,
``cgroup.py``): ``cpu.max`` (``"<cpus × period> <period>"`` µs) and ``memory.max`` (bytes).

That needs a cgroup v2 hierarchy, a writable (delegated) ranks folder, the ``cpu`` and
``memory`` controllers available in it (``cgroup.controllers``: its parent enabled them) and
enabled for its children (``+cpu +memory`` written to its ``cgroup.subtree_control``).
:func:`probe_limits` gathers those facts and :func:`decide_limits` (pure) turns them into a
:class:`HostLimits` whose ``reason`` says, in one line, why limits are not enforced where
they are not — shown like device confinement (``decide.py``).

The agent decides once at start (``setup_host_limits`` in ``__init__.py``), logs the line and
reports ``{"enforced", "reason"}`` in its hello; ``labgang nodes`` shows it. The coordinator
puts each rank's limits in its launch spec (``cpu_limit``, ``memory_limit``, computed by
:func:`rank_limits`), and ``RankCgroups.prepare`` writes them (:func:`apply_limits`) into the
rank's cgroup: the device-fenced one where ranks are confined to their devices (``decide.py``),
else one the agent makes per rank for the limits alone (``RankCgroups`` without devices). On a
cgroup v1 (or hybrid) host whose ``cpu``/``memory`` controllers are bound to v1 hierarchies, the
reason says so (:func:`v1_controllers`): no cgroup v2 folder can ever have them there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTROLLERS = ("cpu", "memory")
"""The cgroup v2 controllers a rank's host limits need."""
CPU_PERIOD_US = 100_000
"""The ``cpu.max`` period in microseconds (the kernel's default)."""


@dataclass(frozen=True, slots=True)
class LimitFacts:
    """What :func:`decide_limits` looks at.

    Attributes:
        simulated: the node's GPUs are simulated (nothing on the host is probed then).
        cgroup2_mount: where the cgroup v2 hierarchy is mounted, or None (cgroup v1 only).
        ranks_dir: the folder ranks' cgroups go in, or None when there is no cgroup v2 hierarchy.
        ranks_dir_error: why ``ranks_dir`` could not be made, or None when it exists.
        controllers: the controllers listed in ``ranks_dir``'s ``cgroup.controllers``.
        enable_error: why ``+cpu +memory`` could not be written to ``ranks_dir``'s
            ``cgroup.subtree_control``, or None when they are enabled for the ranks.
        v1_bound: controller -> mount point of the cgroup v1 hierarchies mounted on the host
            (:func:`v1_controllers`): a controller bound there can never be enabled in cgroup v2.
    """

    simulated: bool
    cgroup2_mount: str | None
    ranks_dir: str | None
    ranks_dir_error: str | None
    controllers: frozenset[str]
    enable_error: str | None
    v1_bound: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class HostLimits:
    """Whether ranks get ``cpu.max``/``memory.max``; ``reason`` says how or why not in one line."""

    enforced: bool
    reason: str
    ranks_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"enforced": bool, "reason": str}``, the shape a node report carries."""
        return {"enforced": self.enforced, "reason": self.reason}

    def message(self) -> str:
        """The agent's start-up line: ``host limits enforced: …`` or ``host limits not enforced: …``."""
        return f"host limits {'enforced' if self.enforced else 'not enforced'}: {self.reason}"


def decide_limits(facts: LimitFacts) -> HostLimits:
    """Choose whether ranks' CPUs and memory are enforced (first missing condition wins).

    Args:
        facts: what :func:`probe_limits` found.
    """
    if facts.simulated:
        return HostLimits(False, "simulated node: its ranks' cgroups are not probed")
    if facts.cgroup2_mount is None:
        return HostLimits(False, "no cgroup v2 hierarchy is mounted (cgroup v1 only)")
    if facts.ranks_dir is None or facts.ranks_dir_error is not None:
        where = facts.ranks_dir or f"{facts.cgroup2_mount} (agent's cgroup unknown)"
        why = facts.ranks_dir_error
        return HostLimits(False, f"cgroup {where} is not writable ({why}); delegate it (Delegate=yes)")
    missing = [c for c in CONTROLLERS if c not in facts.controllers]
    bound = dict(facts.v1_bound)
    if missing and all(c in bound for c in missing):
        where = ", ".join(f"{c} at {bound[c]}" for c in missing)
        return HostLimits(
            False,
            f"cgroup v1 host: controller(s) {', '.join(missing)} are bound to cgroup v1 hierarchies ({where}), so "
            f"the cgroup v2 hierarchy at {facts.cgroup2_mount} cannot have them; limits need a cgroup v2 host "
            "(boot with systemd.unified_cgroup_hierarchy=1)",
        )
    if missing:
        parent = os.path.dirname(facts.ranks_dir)
        return HostLimits(
            False,
            f"controller(s) {', '.join(missing)} not available in {facts.ranks_dir} "
            f"(enable them in {parent}/cgroup.subtree_control, or delegate them: Delegate=cpu memory)",
        )
    if facts.enable_error is not None:
        return HostLimits(
            False,
            f"cannot enable +cpu +memory in {facts.ranks_dir}/cgroup.subtree_control: {facts.enable_error}",
        )
    return HostLimits(True, f"cpu.max and memory.max per rank under {facts.ranks_dir}", facts.ranks_dir)


def v1_controllers(mountinfo_text: str) -> tuple[tuple[str, str], ...]:
    """``(controller, mount point)`` of each of :data:`CONTROLLERS` that ``/proc/self/mountinfo``
    text shows mounted as a cgroup v1 hierarchy (``... - cgroup cgroup rw,cpu``), in that order."""
    found: dict[str, str] = {}
    for line in mountinfo_text.splitlines():
        left, sep, right = line.partition(" - ")
        parts = right.split()
        if not sep or parts[:1] != ["cgroup"] or len(parts) < 3:
            continue
        fields = left.split()
        options = set(parts[2].split(","))
        for controller in CONTROLLERS:
            if controller in options and len(fields) >= 5:
                found.setdefault(controller, fields[4].replace("\\040", " "))
    return tuple((c, found[c]) for c in CONTROLLERS if c in found)


def probe_limits(
    *,
    simulated: bool,
    cgroup2_mount: str | None,
    ranks_dir: str | None,
    make_dir: Callable[[str], None] | None = None,
    v1_bound: tuple[tuple[str, str], ...] = (),
) -> LimitFacts:
    """Gather the facts :func:`decide_limits` needs, in its order, touching the host only once a
    cgroup v2 ranks folder is known: make the folder, read its ``cgroup.controllers`` and, when
    ``cpu`` and ``memory`` are there, write ``+cpu +memory`` to its ``cgroup.subtree_control``.

    Args:
        simulated: whether the NVML backend is simulated (nothing is probed then).
        cgroup2_mount: the cgroup v2 mount point (``decide.cgroup2_mount_point``), or None.
        ranks_dir: the ranks' folder (``HostFacts.ranks_dir``), or None.
        make_dir: makes a folder (default ``os.makedirs(..., exist_ok=True)``).
        v1_bound: the host's cgroup v1 hierarchies of ``cpu``/``memory`` (:func:`v1_controllers`).
    """
    facts = LimitFacts(simulated, cgroup2_mount, ranks_dir, None, frozenset(), None, v1_bound)
    if simulated or cgroup2_mount is None or ranks_dir is None:
        return facts
    try:
        (make_dir or (lambda p: os.makedirs(p, exist_ok=True)))(ranks_dir)
    except OSError as exc:
        return LimitFacts(simulated, cgroup2_mount, ranks_dir, exc.strerror or str(exc), frozenset(), None, v1_bound)
    try:
        available = frozenset(Path(ranks_dir, "cgroup.controllers").read_text(encoding="utf-8").split())
    except OSError:
        available = frozenset()  # not a cgroup v2 folder after all: no controller to enable
    if not all(c in available for c in CONTROLLERS):
        return LimitFacts(simulated, cgroup2_mount, ranks_dir, None, available, None, v1_bound)
    try:
        Path(ranks_dir, "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS), encoding="utf-8")
    except OSError as exc:
        return LimitFacts(simulated, cgroup2_mount, ranks_dir, None, available, exc.strerror or str(exc), v1_bound)
    return LimitFacts(simulated, cgroup2_mount, ranks_dir, None, available, None, v1_bound)


@dataclass(frozen=True, slots=True)
class RankLimits:
    """One rank's host limits: ``cpus`` CPUs (None: no CPU limit), ``memory_bytes`` (None: no memory limit)."""

    cpus: int | None
    memory_bytes: int | None

    def cpu_max(self) -> str:
        """The ``cpu.max`` line: ``"<cpus × 100000> 100000"``, or ``"max 100000"`` without a CPU limit."""
        quota = "max" if self.cpus is None else str(self.cpus * CPU_PERIOD_US)
        return f"{quota} {CPU_PERIOD_US}"

    def memory_max(self) -> str:
        """The ``memory.max`` value: bytes, or ``"max"`` without a memory limit."""
        return "max" if self.memory_bytes is None else str(self.memory_bytes)


def rank_limits(
    *,
    cpus_per_task: int | None,
    mem_per_node_bytes: int | None,
    mem_per_gpu_bytes: int | None,
    ranks_on_node: int,
    rank_gpus: int,
) -> RankLimits:
    """One rank's limits from the job's request, as Slurm splits them over a node's tasks.

    ``--mem`` is per node, so each of the node's ``ranks_on_node`` ranks gets an equal share
    (rounded down); ``--mem-per-gpu`` gives a rank that many bytes per GPU it holds.

    Args:
        cpus_per_task: ``-c`` CPUs per rank, or None.
        mem_per_node_bytes: ``--mem`` in bytes, or None.
        mem_per_gpu_bytes: ``--mem-per-gpu`` in bytes, or None (exclusive with ``mem_per_node_bytes``).
        ranks_on_node: how many of the job's ranks run on this rank's node (>= 1).
        rank_gpus: how many GPUs this rank holds (>= 0).

    Raises:
        ValueError: both memory forms given, ``ranks_on_node`` < 1, ``rank_gpus`` < 0, or a
            count that is not positive.
    """
    if mem_per_node_bytes is not None and mem_per_gpu_bytes is not None:
        raise ValueError("mem: --mem and --mem-per-gpu are exclusive (give one)")
    if ranks_on_node < 1:
        raise ValueError(f"ranks_on_node: {ranks_on_node} is not a rank count (allowed: an integer >= 1)")
    if rank_gpus < 0:
        raise ValueError(f"rank_gpus: {rank_gpus} is not a GPU count (allowed: an integer >= 0)")
    for name, value in (
        ("cpus_per_task", cpus_per_task),
        ("mem_per_node_bytes", mem_per_node_bytes),
        ("mem_per_gpu_bytes", mem_per_gpu_bytes),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{name}: {value} is not a positive amount (allowed: an integer >= 1, or none)")
    memory: int | None = None
    if mem_per_node_bytes is not None:
        memory = mem_per_node_bytes // ranks_on_node
    elif mem_per_gpu_bytes is not None and rank_gpus > 0:
        memory = mem_per_gpu_bytes * rank_gpus
    return RankLimits(cpus_per_task, memory)


def apply_limits(rank_dir: str, limits: RankLimits) -> None:
    """Write ``cpu.max`` and ``memory.max`` of one rank's cgroup folder.

    Raises:
        OSError: the files cannot be written (no such controller enabled, not delegated).
    """
    Path(rank_dir, "cpu.max").write_text(limits.cpu_max(), encoding="utf-8")
    Path(rank_dir, "memory.max").write_text(limits.memory_max(), encoding="utf-8")
