"""The node's host CPUs and memory offered to jobs (``-c``, ``--mem``; docs/host-resources.md).

Logical CPUs (``psutil.cpu_count()``) and total memory (``psutil.virtual_memory().total``),
or the agent config's ``cpus``/``memory`` where given, minus its ``reserve_cpus`` and
``reserve_memory``; never below 0. Read once when the agent starts: they do not change while
it runs. The agent puts them in each inventory it reports (``NodeInventory.host_cpus`` and
``host_memory``); the coordinator carries them into the scheduler's ``Node``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import psutil
from labgang.agent.config import AgentConfig
from labgang.agent.inventory import NodeInventory
from labgang.agent.mem_size import parse_mem


@dataclass(frozen=True, slots=True)
class HostCapacity:
    """What jobs may use of this host.

    Attributes:
        cpus: logical CPUs after the reserve (>= 0).
        memory: bytes after the reserve (>= 0).
    """

    cpus: int
    memory: int

    @classmethod
    def read(cls, config: AgentConfig) -> HostCapacity:
        """The host's CPUs and memory (psutil, or the config's overrides) minus the config's reserve."""
        cpus = config.cpus if config.cpus is not None else psutil.cpu_count(logical=True) or 1
        memory = parse_mem(config.memory) if config.memory is not None else psutil.virtual_memory().total
        return cls(
            cpus=max(0, cpus - config.reserve_cpus),
            memory=max(0, memory - parse_mem(config.reserve_memory, zero=True)),
        )

    def fill(self, inv: NodeInventory) -> NodeInventory:
        """``inv`` with ``host_cpus`` and ``host_memory`` set to this capacity."""
        return dataclasses.replace(inv, host_cpus=self.cpus, host_memory=self.memory)
