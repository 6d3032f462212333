"""A job of groups (Slurm's heterogeneous job, a JobSet's replicated jobs): the stored model.

A job is one or more named *groups* (default ``g0``, ``g1``, …), each with its own per-rank
shape, command and environment, admitted as one: all of its ranks start together or none does
(``docs/job-groups.md``). Ranks are numbered globally in group order: group ``g0``'s ranks are
``0 … n0-1``, ``g1``'s ``n0 … n0+n1-1``, and so on.

A one-group job is today's job and carries no groups at all (``JobSpec.groups == ()``): its
spec, its wire body and its store row are what they were before groups existed. A job of two
or more groups keeps its groups in ``JobSpec.groups``; then the spec's own shape fields describe
the first group, except ``workers``, which is the number of ranks over all groups (see
:func:`labgang.launcher.lifecycle.records.JobSpec`).

:class:`GroupSpec` is one group as the user gave it (what the store holds);
:meth:`GroupSpec.request` is the scheduler's view of it (a :class:`~labgang.launcher.model.JobRequest`,
named by :class:`~labgang.launcher.model.GroupRequest`). :func:`rank_groups` says which group
each global rank belongs to: the accessor dispatch uses to give every rank its group's command
and environment.

A group name follows the launch contract's one rule (``GROUP_NAME_RE`` in
``agent/supervisor/spec.py``): a letter, then at most 63 letters, digits, ``_`` or ``-``;
``LABGANG_GROUP_<NAME>_ADDR`` spells ``-`` as ``_`` (``group_env_name``), so no two groups of a
job may differ only there or in case. A submission's names are checked where it is read
(``launcher/coordinator/requests.py``); this model, which the lifecycle imports, does not import
the launch contract for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labgang.launcher.model import GPU, GroupRequest, JobRequest

MAX_GROUPS = 16
"""The most groups one job may have."""


def default_group_name(index: int) -> str:
    """The name of the group at ``index`` (0-based) when the user gave none: ``g0``, ``g1``, …"""
    return f"g{index}"


@dataclass(frozen=True)
class GroupSpec:
    """One group of a job as submitted.

    ``workers`` ranks, each with ``per_worker`` devices of ``resource`` (``"gpu"`` or
    ``"mig-<profile>"``; ``per_worker`` may be 0: a rank with no device, such as an MPI
    launcher). The other shape fields mean what :class:`~labgang.launcher.model.JobRequest`'s
    fields of those names mean, for this group's ranks only (``topology`` among the group's own
    ranks, ``min_workers`` the group's elastic floor, ``nodes`` the group's node count).
    ``argv`` is the group's command; ``env`` the variables the group's ranks get on top of the
    job's environment.
    """

    name: str
    workers: int = 1
    per_worker: int = 1
    resource: str = GPU
    gpu_model: str | None = None
    nodes: int | None = None
    topology: str | None = None
    min_workers: int | None = None
    cpus_per_task: int = 0
    mem: int = 0
    mem_per_gpu: int = 0
    exclusive: bool = False
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_request(cls, group: GroupRequest) -> GroupSpec:
        """A group with ``group``'s name and shape and no command (``labgang simulate``'s jobs)."""
        r = group.request
        return cls(
            name=group.name,
            workers=r.workers,
            per_worker=r.per_worker,
            resource=r.resource,
            gpu_model=r.gpu_model,
            nodes=r.nodes,
            topology=r.topology,
            min_workers=r.min_workers,
            cpus_per_task=r.cpus_per_task,
            mem=r.mem,
            mem_per_gpu=r.mem_per_gpu,
            exclusive=r.exclusive,
        )

    def request(self) -> JobRequest:
        """The scheduler's view of this group's ranks."""
        return JobRequest(
            workers=self.workers,
            per_worker=self.per_worker,
            resource=self.resource,
            gpu_model=self.gpu_model,
            nodes=self.nodes,
            topology=self.topology,
            min_workers=self.min_workers,
            cpus_per_task=self.cpus_per_task,
            mem=self.mem,
            mem_per_gpu=self.mem_per_gpu,
            exclusive=self.exclusive,
        )

    def group_request(self) -> GroupRequest:
        """This group named, for the scheduler."""
        return GroupRequest(self.name, self.request())

    @property
    def shape(self) -> str:
        """``"4x2"``: ranks × devices per rank (``"4x1g.10gb"`` for MIG, ``"1x0"`` for no device)."""
        per = self.resource[4:] if self.resource.startswith("mig-") else str(self.per_worker)
        return f"{self.workers}x{per}"

    def to_dict(self) -> dict[str, Any]:
        """The group as a JSON-ready dict (inside the ``jobs.spec`` column's ``groups`` list)."""
        out = {name: getattr(self, name) for name in _GROUP_FIELDS}
        out["argv"] = list(self.argv)
        out["env"] = dict(self.env)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupSpec:
        """Read back :meth:`to_dict` output."""
        fields = dict(data)
        fields["argv"] = tuple(fields.get("argv") or ())
        fields["env"] = dict(fields.get("env") or {})
        return cls(**fields)


_GROUP_FIELDS = tuple(GroupSpec.__dataclass_fields__)


def job_shape(groups: Sequence[GroupSpec]) -> str:
    """The shape of a job of groups as the queue shows it: ``"1x0+4x2"``."""
    return "+".join(g.shape for g in groups)


@dataclass(frozen=True, slots=True)
class RankGroup:
    """Which group one global rank belongs to: the group, the rank's index within it
    (``LABGANG_GROUP_RANK``) and the group's first global rank (Slurm's het-job offset is the
    group's index, not this)."""

    group: GroupSpec
    index: int
    group_rank: int
    first_rank: int


def rank_groups(groups: Sequence[GroupSpec]) -> list[RankGroup]:
    """One :class:`RankGroup` per global rank, in rank order (groups in order, ranks in order)."""
    out: list[RankGroup] = []
    first = 0
    for index, group in enumerate(groups):
        out.extend(RankGroup(group, index, r, first) for r in range(group.workers))
        first += group.workers
    return out


def rank_group(groups: Sequence[GroupSpec], rank: int) -> RankGroup:
    """The group of global rank ``rank``.

    Raises:
        IndexError: ``rank`` is negative or not below the job's total number of ranks.
    """
    if rank < 0:
        raise IndexError(f"rank {rank} is negative")
    first = 0
    for index, group in enumerate(groups):
        if rank < first + group.workers:
            return RankGroup(group, index, rank - first, first)
        first += group.workers
    raise IndexError(f"rank {rank} is not below the job's {first} ranks")
