"""The confinement writer: one cgroup v2 folder per rank, with its device filter attached.

:meth:`RankCgroups.prepare` makes ``<ranks_dir>/<job>.<rank>`` and attaches the eBPF device
filter that lets the rank open only its GPUs (MIG: the parent GPU and its two capabilities)
and the control devices (``devices.py``). It returns the folder's ``cgroup.procs``: the rank's
small parent writes its own pid there before it starts the rank (``shim.py``, still root), so
the rank and every process it starts are inside from their first instruction.
:meth:`RankCgroups.release` removes the folder once the rank is gone (the kernel refuses to
remove a cgroup that still has processes; that is logged and retried at the next release).

Where the agent enforces host limits (``hostlimits.py``, ``enforce_limits``),
:meth:`RankCgroups.prepare` also writes the rank's ``cpu.max`` and ``memory.max`` (the probe
enabled ``+cpu +memory`` in ``ranks_dir``'s ``cgroup.subtree_control`` then). Otherwise no
controller is enabled there: a device filter needs none, and so the agent may stay in its own
cgroup beside its ranks (cgroup v2's "no internal processes" rule applies only to cgroups that
enable controllers for their children).

Where the card can hold a shard rank to its ``--gpu-mem`` budget (``devmem.py``: the cgroup v2
``dmem`` controller knows every card; the probe enabled ``+dmem`` in ``ranks_dir``),
:attr:`RankCgroups.dmem` is set and :meth:`RankCgroups.prepare` writes the budget into the rank's
``dmem.max`` too; that write never fails the launch (the node falls back to watching budgets and
says why).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable

from .bpfdev import DeviceRule, install_device_filter
from .devices import NodeDevices
from .devmem import DmemWriter
from .hostlimits import RankLimits, apply_limits

log = logging.getLogger("labgang.agent.confine")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")

Installer = Callable[[str, Iterable[DeviceRule], Iterable[int]], None]


class ConfineError(OSError):
    """A rank's cgroup could not be made or fenced; the rank is not started (fail closed)."""


class RankCgroups:
    """Rank cgroups under ``ranks_dir`` (a writable cgroup v2 folder).

    Args:
        ranks_dir: the folder (``Confinement.ranks_dir``).
        devices: the host's NVIDIA device nodes, to translate UUIDs into device numbers; None
            for cgroups that only hold ranks to their host limits (``enforce_limits``) where ranks
            cannot be confined to their devices: no device filter is attached then.
        install: attaches a filter (default :func:`~labgang.agent.confine.bpfdev.install_device_filter`).
        enforce_limits: write each rank's ``cpu.max``/``memory.max`` (the host allows it, ``hostlimits.py``).

    Attributes:
        dmem: writes shard ranks' device-memory budgets (``devmem.py``), or None where the card
            cannot hold them (set by the agent once it decided, ``service.py``).
    """

    def __init__(
        self,
        ranks_dir: str,
        devices: NodeDevices | None,
        *,
        install: Installer | None = None,
        enforce_limits: bool = False,
    ) -> None:
        self.ranks_dir = ranks_dir
        self.devices = devices
        self._install = install or install_device_filter
        self.enforce_limits = enforce_limits
        self.dmem: DmemWriter | None = None

    def path(self, job_id: str, rank: int) -> str:
        """The cgroup folder of one rank (characters outside ``[A-Za-z0-9_.-]`` of the job id become ``_``)."""
        return os.path.join(self.ranks_dir, f"{_UNSAFE.sub('_', job_id)}.{rank}")

    def prepare(
        self,
        job_id: str,
        rank: int,
        devices: Iterable[str],
        limits: RankLimits | None = None,
        gpu_mem: int | None = None,
    ) -> str:
        """Make the rank's cgroup and attach its device filter; return its ``cgroup.procs`` path.

        With ``enforce_limits`` and ``limits``, the rank's ``cpu.max``/``memory.max`` are written too;
        with :attr:`dmem` and ``gpu_mem`` (a shard rank's budget in bytes, on its one card, the first
        of ``devices``), its ``dmem.max`` (a refused write is no error: ``DmemWriter.write``).
        A folder left by an earlier attempt of the same rank is removed first (a new filter per attempt).

        Raises:
            ConfineError: the devices cannot be translated, or the folder or filter cannot be made.
        """
        from .devices import DeviceNodeError

        devices = list(devices)
        try:
            rules = None if self.devices is None else self.devices.rules_for(devices)
        except DeviceNodeError as exc:
            raise ConfineError(0, f"cannot confine rank {rank} of job {job_id}: {exc}") from None
        where = self.path(job_id, rank)
        try:
            if os.path.isdir(where):
                os.rmdir(where)
            os.mkdir(where)
            if self.devices is not None and rules is not None:
                self._install(where, rules, self.devices.guarded_majors())
            if self.enforce_limits and limits is not None:
                apply_limits(where, limits)
            if self.dmem is not None and gpu_mem is not None and devices:
                self.dmem.write(where, devices[0], gpu_mem, job_id=job_id, rank=rank)
        except OSError as exc:
            self._remove(where)
            raise ConfineError(
                exc.errno or 0, f"cannot confine rank {rank} of job {job_id} in {where}: {exc}"
            ) from None
        return os.path.join(where, "cgroup.procs")

    def release(self, job_id: str, rank: int) -> None:
        """Remove the rank's cgroup (once its processes are gone); a failure is logged, not raised."""
        self._remove(self.path(job_id, rank))

    @staticmethod
    def _remove(where: str) -> None:
        try:
            os.rmdir(where)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cgroup %s not removed: %s", where, exc.strerror or exc)
