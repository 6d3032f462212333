"""An impossible ``--topology`` is refused at submission like other impossible requests
(``never_schedulable``: the coordinator's submission check), naming the field ``topology``."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode
from labgang.launcher.scheduler.unschedulable import never_schedulable
from sched_builders import Cluster, queue


def _check(request: JobRequest):
    q = queue("q").nominal(gpu=8).build()
    nodes = Cluster().node("n1", 4).node("n2", 4).nodes  # no topology facts (no links, no NUMA keys)
    return never_schedulable(request, q, [q], nodes)


def test_nvlink_on_nodes_without_topology_facts_is_refused_naming_the_field():
    found = _check(JobRequest(workers=1, per_worker=2, topology="nvlink"))
    assert found is not None
    reason, field = found
    assert field == "topology" and reason.code == ReasonCode.UNSCHEDULABLE
    assert reason.message == (
        "topology nvlink: needs 2 gpu on NVLink; n1 has no topology facts; n2 has no topology facts, "
        "even on an empty cluster"
    )


def test_levels_that_can_be_met_are_accepted():
    base = JobRequest(workers=2, per_worker=2)
    assert _check(replace(base, topology="node")) is None  # one node holds 4: no facts needed
    assert _check(JobRequest(workers=1, per_worker=1, topology="nvlink")) is None  # one device is always close
    assert _check(base) is None


def test_a_gang_larger_than_any_node_is_refused_for_the_level():
    reason, field = _check(JobRequest(workers=3, per_worker=2, topology="node")) or (None, None)
    assert field == "topology" and reason is not None
    assert "no node has 6 free (largest has 4)" in reason.message
