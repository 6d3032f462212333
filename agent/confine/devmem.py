"""Whether a shard rank's ``--gpu-mem`` budget is enforced by the card or only watched, and the write.

Where the kernel's cgroup v2 ``dmem`` controller (Linux 6.14+) knows the node's cards, the agent
holds each shard rank to its budget through the rank's own cgroup (``cgroup.py``): the root's
``dmem.capacity`` lists one *region* per line (``drm/0000:3b:00.0/vram0 85899345920``: its name
and its size in bytes; the name carries the card's PCI address), ``+dmem`` in the ranks' folder's
``cgroup.subtree_control`` gives each rank cgroup a ``dmem.max``, and writing
``"<region> <bytes>"`` there before the rank starts makes the driver refuse the rank's allocations
past it. A card is matched to its region by its PCI bus id (NVML's ``nvmlDeviceGetPciInfo``
``busId``, ``00000000:3B:00.0``, whose 8-digit domain the kernel writes with 4 digits, lower case):
the largest region whose name has that address as one of its ``/``-separated parts (the card's
memory, not a small reserved region beside it).

:func:`probe_dmem` gathers the facts (and enables ``+dmem``), :func:`decide_gpu_mem` (pure) turns
them into :class:`GpuMemLimits`: ``enforced`` (reason ``dmem: ...``) only where every card of the
node has a region and the ranks get cgroups with the controller, else ``watched`` with the first
missing condition as its reason; ``labgang nodes`` prints it. :class:`DmemWriter` does the write
per rank; a write the kernel refuses (EPERM, EINVAL) or a card without a region never fails the
launch: the node falls back to watching from then on and its facts say why.

Everywhere, and as the second line where the card enforces, the agent watches budgets through NVML
(``agent/supervisor/budgets.py``) and reports or stops the job (``violation``). MPS ranks are held
to theirs by their server (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``); their memory is the server's, in
the server's cgroup, so no ``dmem.max`` is written for them.

NVML's own call for this, ``nvmlDeviceSetMemoryLimits_v1`` (which rests on the same ``dmem``
controller), is deliberately not used: its struct's layout is in no document we have, and calling
it through ctypes with a guessed layout would be a bug on real hardware. The ``dmem`` files are the
kernel's documented interface (Documentation/admin-guide/cgroup-v2.rst, "DMEM").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

log = logging.getLogger("labgang.agent.confine")

CONTROLLER = "dmem"
CAPACITY = "dmem.capacity"
"""The root cgroup's file of regions: ``"<region> <bytes>"`` per line."""
MAX = "dmem.max"
"""A non-root cgroup's limits: one ``"<region> <bytes>|max"`` line per region."""
WATCHED_TAIL = "budgets are watched through NVML"


@dataclass(frozen=True, slots=True)
class GpuMemLimits:
    """How budgets are held on this node.

    Attributes:
        mode: ``"enforced"`` (the card refuses allocations past a shard rank's budget) or ``"watched"``.
        reason: one line: how, or why not.
        regions: card UUID → its ``dmem`` region name (only where ``enforced``).
    """

    mode: str
    reason: str
    regions: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"mode", "reason"}``: the ``gpu_mem`` part of the agent's ``sharing`` facts."""
        return {"mode": self.mode, "reason": self.reason}


def parse_capacity(text: str) -> dict[str, int]:
    """``dmem.capacity`` text → region name → bytes (lines that are not ``"<name> <bytes>"`` are skipped)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def kernel_bus_id(bus_id: str) -> str | None:
    """NVML's ``busId`` (``00000000:3B:00.0``, or ``0000:3b:00.0``) as the kernel names the PCI
    device: ``0000:3b:00.0`` (4-digit domain, lower case); None for text that is not one."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3 or "." not in parts[2]:
        return None
    slot, _, function = parts[2].partition(".")
    try:
        domain, bus, dev, fn = (int(x, 16) for x in (parts[0], parts[1], slot, function))
    except ValueError:
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


def card_region(capacity: Mapping[str, int], bus_id: str) -> str | None:
    """The region of the card at ``bus_id`` (NVML's ``busId``): the largest of ``capacity`` whose
    name has the card's PCI address as one of its ``/``-separated parts; None where none has."""
    address = kernel_bus_id(bus_id)
    if address is None:
        return None
    mine = [(size, name) for name, size in capacity.items() if address in name.lower().split("/")]
    return max(mine)[1] if mine else None


@dataclass(frozen=True, slots=True)
class DmemFacts:
    """What :func:`decide_gpu_mem` looks at.

    Attributes:
        simulated: the node's GPUs are simulated (nothing is probed then).
        cgroup2_mount: the cgroup v2 mount point, or None (cgroup v1 only).
        root_controllers: the controllers of the root's ``cgroup.controllers``.
        capacity: region → bytes, from the root's ``dmem.capacity``.
        cards: each card's UUID → its NVML PCI bus id (None where NVML could not tell).
        ranks_dir: the folder the ranks' own cgroups go in, or None where ranks get none.
        no_cgroup_reason: why ranks get no cgroup (where ``ranks_dir`` is None).
        ranks_controllers: the controllers of ``ranks_dir``'s ``cgroup.controllers``.
        enable_error: why ``+dmem`` could not be written to ``ranks_dir``'s ``cgroup.subtree_control``.
    """

    simulated: bool
    cgroup2_mount: str | None
    root_controllers: frozenset[str] = frozenset()
    capacity: Mapping[str, int] = field(default_factory=dict)
    cards: Mapping[str, str | None] = field(default_factory=dict)
    ranks_dir: str | None = None
    no_cgroup_reason: str | None = None
    ranks_controllers: frozenset[str] = frozenset()
    enable_error: str | None = None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def probe_dmem(
    *,
    simulated: bool,
    cgroup2_mount: str | None,
    cards: Mapping[str, str | None],
    ranks_dir: str | None,
    no_cgroup_reason: str | None = None,
) -> DmemFacts:
    """Gather :func:`decide_gpu_mem`'s facts in its order, touching the host only once the root
    lists ``dmem``: read ``dmem.capacity``; where every card has a region and ranks get cgroups,
    read ``ranks_dir``'s ``cgroup.controllers`` and, with ``dmem`` there, write ``+dmem`` to its
    ``cgroup.subtree_control`` (as ``hostlimits.probe_limits`` does for ``cpu``/``memory``).

    Args:
        simulated: the NVML backend is simulated.
        cgroup2_mount: the cgroup v2 mount point (``decide.cgroup2_mount_point``), or None.
        cards: card UUID → NVML ``busId`` (None where unknown).
        ranks_dir: the folder of the ranks' cgroups (``RankCgroups.ranks_dir``), or None.
        no_cgroup_reason: why ranks get no cgroup, where ``ranks_dir`` is None.
    """
    facts = DmemFacts(
        simulated, cgroup2_mount, cards=dict(cards), ranks_dir=ranks_dir, no_cgroup_reason=no_cgroup_reason
    )
    if simulated or cgroup2_mount is None:
        return facts
    root = frozenset((_read(os.path.join(cgroup2_mount, "cgroup.controllers")) or "").split())
    facts = replace(facts, root_controllers=root)
    if CONTROLLER not in root:
        return facts
    capacity = parse_capacity(_read(os.path.join(cgroup2_mount, CAPACITY)) or "")
    facts = replace(facts, capacity=capacity)
    if not cards or ranks_dir is None or any(b is None or card_region(capacity, b) is None for b in cards.values()):
        return facts  # watched whatever the ranks' folder says: enable nothing there
    ranks = frozenset((_read(os.path.join(ranks_dir, "cgroup.controllers")) or "").split())
    error = None
    if CONTROLLER in ranks:
        try:
            Path(ranks_dir, "cgroup.subtree_control").write_text(f"+{CONTROLLER}", encoding="utf-8")
        except OSError as exc:
            error = exc.strerror or str(exc)
    return replace(facts, ranks_controllers=ranks, enable_error=error)


def decide_gpu_mem(facts: DmemFacts) -> GpuMemLimits:
    """Enforced or watched, and why (first missing condition wins; see the module docstring)."""
    if facts.simulated:
        return GpuMemLimits("watched", f"simulated GPUs: {WATCHED_TAIL}")
    if facts.cgroup2_mount is None:
        return GpuMemLimits("watched", f"no cgroup v2 hierarchy is mounted (cgroup v1 only): {WATCHED_TAIL}")
    if CONTROLLER not in facts.root_controllers:
        return GpuMemLimits(
            "watched",
            f"no cgroup v2 dmem controller in {facts.cgroup2_mount}/cgroup.controllers "
            f"(Linux 6.14+, CONFIG_CGROUP_DMEM): {WATCHED_TAIL}",
        )
    if not facts.cards:
        return GpuMemLimits("watched", f"no GPU whose memory a budget could hold: {WATCHED_TAIL}")
    regions: dict[str, str] = {}
    missing = []
    for uuid, bus_id in sorted(facts.cards.items()):
        region = None if bus_id is None else card_region(facts.capacity, bus_id)
        if region is None:
            missing.append(f"{uuid} (bus {kernel_bus_id(bus_id) if bus_id else 'unknown'})")
        else:
            regions[uuid] = region
    if missing:
        return GpuMemLimits(
            "watched",
            f"no dmem region for card(s) {', '.join(missing)} in {facts.cgroup2_mount}/{CAPACITY} "
            f"(the driver registers none): {WATCHED_TAIL}",
        )
    if facts.ranks_dir is None:
        why = facts.no_cgroup_reason or "neither device confinement nor host limits give them one"
        return GpuMemLimits("watched", f"ranks get no cgroup of their own ({why}): {WATCHED_TAIL}")
    if CONTROLLER not in facts.ranks_controllers:
        parent = os.path.dirname(facts.ranks_dir)
        return GpuMemLimits(
            "watched",
            f"controller dmem not available in {facts.ranks_dir} (enable it in {parent}/cgroup.subtree_control, "
            f"or delegate it: Delegate=dmem): {WATCHED_TAIL}",
        )
    if facts.enable_error is not None:
        return GpuMemLimits(
            "watched",
            f"cannot enable +dmem in {facts.ranks_dir}/cgroup.subtree_control: {facts.enable_error}: {WATCHED_TAIL}",
        )
    return GpuMemLimits(
        "enforced",
        f"dmem: each shard rank's budget in its cgroup's {MAX} under {facts.ranks_dir} "
        f"({len(regions)} card(s) in {facts.cgroup2_mount}/{CAPACITY}); also watched through NVML",
        regions,
    )


class DmemWriter:
    """Writes shard ranks' budgets into their cgroups' ``dmem.max``; after one failed write, none more.

    Args:
        regions: card UUID → its ``dmem`` region (:attr:`GpuMemLimits.regions` of an ``enforced`` decision).
        on_fallback: told the node's new facts (a ``watched`` :class:`GpuMemLimits` naming the failed
            write) once, when the node falls back to watching.
    """

    def __init__(self, regions: Mapping[str, str], on_fallback: Callable[[GpuMemLimits], None] | None = None) -> None:
        self.regions = dict(regions)
        self.on_fallback = on_fallback
        self.fallback: GpuMemLimits | None = None

    @staticmethod
    def line(region: str, budget: int) -> str:
        """The ``dmem.max`` line of a budget: ``"<region> <bytes>"``."""
        return f"{region} {budget}"

    def write(self, rank_dir: str, card: str, budget: int, *, job_id: str, rank: int) -> bool:
        """Hold the rank whose cgroup is ``rank_dir`` to ``budget`` bytes of card ``card`` (UUID).

        Returns:
            True when the kernel took the limit; False when the node watches budgets instead (this
            write failed, or an earlier one did). Never raises: a budget is never a reason not to start.
        """
        if self.fallback is not None:
            return False
        region = self.regions.get(card)
        if region is None:
            self._fall_back(f"card {card} of rank {rank} of job {job_id} has no dmem region")
            return False
        try:
            Path(rank_dir, MAX).write_text(self.line(region, budget), encoding="utf-8")
        except OSError as exc:
            why = exc.strerror or str(exc)
            line = self.line(region, budget)
            self._fall_back(f"the kernel refused {MAX} '{line}' of rank {rank} of job {job_id} ({why})")
            return False
        return True

    def _fall_back(self, what: str) -> None:
        self.fallback = GpuMemLimits("watched", f"dmem write failed: {what}; {WATCHED_TAIL} from then on")
        log.warning("--gpu-mem budgets of shard ranks: %s", self.fallback.reason)
        if self.on_fallback is not None:
            self.on_fallback(self.fallback)
