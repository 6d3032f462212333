"""Where the groups of a job of groups landed, for dispatch: each rank's group, its rank and size
in it, and every group's rank-0 host (``LaunchSpec.group``; docs/group-lifecycle.md).

Pure: computed from the job record of an admitted attempt and the nodes' addresses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from labgang.agent.supervisor.spec import LaunchGroup
from labgang.launcher.lifecycle.group_policy import GroupLayout
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.rules import group_layout


@dataclass(frozen=True)
class GroupPlacement:
    """The groups of one attempt as placed.

    Attributes:
        layout: the groups' names and the group index of each global rank.
        hosts: per group (group order), the host of its first rank: the agent's address, else the node name.
        nodes: per group, its nodes in order of first appearance by rank.
    """

    layout: GroupLayout
    hosts: tuple[str, ...]
    nodes: tuple[tuple[str, ...], ...]

    def index(self, rank: int) -> int:
        """The group index of global ``rank``.

        Raises:
            IndexError: ``rank`` is not a rank of the attempt.
        """
        return self.layout.rank_groups[rank]

    def launch_group(self, rank: int) -> LaunchGroup:
        """The ``LaunchSpec.group`` of global ``rank``: its group, its rank in it, the group's size
        and every group's rank-0 host.

        Raises:
            IndexError: ``rank`` is not a rank of the attempt.
        """
        g = self.index(rank)
        ranks = self.layout.ranks_of(g)
        return LaunchGroup(
            name=self.layout.names[g],
            rank=ranks.index(rank),
            size=len(ranks),
            addrs=tuple(zip(self.layout.names, self.hosts, strict=True)),
        )


def group_placement(job: JobRecord, addresses: Mapping[str, str] | None = None) -> GroupPlacement:
    """The placement of ``job``'s groups in its current attempt (its ranks placed, numbered
    0..n-1 over the groups in group order).

    Args:
        addresses: node -> the address its agent connected from (``MASTER_ADDR``'s source);
            a node missing from it is given by name.

    Raises:
        ValueError: a group has no rank in this attempt.
    """
    layout = group_layout(job)
    hosts: list[str] = []
    nodes: list[tuple[str, ...]] = []
    for g, name in enumerate(layout.names):
        ranks = layout.ranks_of(g)
        if not ranks:
            raise ValueError(f"group {name} has no rank in attempt {job.run_id}")
        order = [job.ranks[r].node for r in ranks]
        first = order[0]
        hosts.append((addresses or {}).get(first) or first)
        nodes.append(tuple(dict.fromkeys(order)))
    return GroupPlacement(layout, tuple(hosts), tuple(nodes))
