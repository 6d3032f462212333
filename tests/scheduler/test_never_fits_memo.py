"""Whether a pending job could ever start (``nominate._never_fits_kept``) is remembered across
cycles per quota tree and node layout: over random sequences of cycles (queues and nodes kept as
the very same tuples, replaced by equal new ones or by different ones; plain gangs, elastic
gangs, ``--nodes``, host CPU and memory requests, MIG, a queue that does not list a resource,
per-user limits; running jobs coming and going), every cycle's verdicts equal those judged
anew with the memo off."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.model import QueueSpec
from labgang.launcher.scheduler import nominate as nominate_mod
from labgang.launcher.scheduler.decisions import PendingReason
from labgang.launcher.scheduler.nominate import nominate
from labgang.launcher.scheduler.snapshot import Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, JobBuilder, job, queue


def nodes_for(seed: int) -> Cluster:
    """2-4 nodes of 2-8 GPUs (some with known CPUs and memory), one MIG node on odd seeds."""
    cluster = Cluster()
    for k in range(2 + seed % 3):
        gpus = (2, 4, 8)[(seed >> k) % 3]
        cpus = 32 if (seed >> (k + 3)) % 2 else None
        cluster.node(f"n{k}", gpus=gpus, cpus=cpus, mem_gib=256 if cpus else None)
    if seed % 2:
        cluster.mig_node("m0", gpus=1, profiles=["1g.10gb", "1g.10gb"])
    return cluster


def queues_for(seed: int) -> tuple[QueueSpec, ...]:
    """Two queues in a cohort; nominal quotas, a borrowing limit and user limits vary with ``seed``."""
    a = queue("a").nominal(gpu=(4, 8, 16)[seed % 3]).cohort("lab")
    if seed % 5 == 0:
        a = a.borrowing_limit(gpu=seed % 4)
    if seed % 7 == 0:
        a = a.user_limits(gpus=6)
    b = queue("b").nominal(gpu=(2, 12)[(seed >> 2) % 2]).cohort("lab")
    if seed % 3 == 0:
        b = queue("b").nominal(gpu=4, mig_1g_10gb=2).cohort("lab")
    return (a.build(), b.build())


def pending_for(seed: int, k: int) -> JobBuilder:
    """A pending job of one of several shapes (some of which never fit some clusters or quotas)."""
    b = job(f"p{k}").queue("ab"[seed % 2]).priority(seed % 3)
    shape = (seed >> 1) % 7
    if shape == 0:
        b = b.gpus(1 + seed % 9)
    elif shape == 1:
        b = b.gang(1 + seed % 4, 1 + (seed >> 3) % 8)
    elif shape == 2:
        b = b.gang(2 + seed % 3, 2).nodes(1)
    elif shape == 3:
        b = b.gang(4, 2).elastic(1 + seed % 4)
    elif shape == 4:
        b = b.gpus(1 + seed % 2).host(cpus=(8, 64)[seed % 2])
    elif shape == 5:
        b = b.mig("1g.10gb", workers=1 + seed % 3)
    else:
        b = b.gpus(2).host(mem_gib=(64, 512)[seed % 2])
    return b


def verdicts(snap: Snapshot) -> list[tuple[str, PendingReason | None]]:
    by_queue, orphans = nominate(snap, CycleState(snap))
    return [(e.job.id, e.unschedulable) for entries in by_queue.values() for e in entries] + [
        (p.job_id, p.reason) for p in orphans
    ]


step = st.tuples(
    st.sampled_from(["same", "same", "same", "equal queues", "new queues", "equal nodes", "new nodes", "run"]),
    st.integers(0, 10**6),
    st.lists(st.integers(0, 10**6), min_size=0, max_size=6),
)


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(st.lists(step, min_size=3, max_size=25))
def test_kept_verdicts_equal_the_fresh_ones(steps: list[tuple[str, int, list[int]]]) -> None:
    cluster = nodes_for(steps[0][1])
    nodes = tuple(cluster.nodes)
    queues = queues_for(steps[0][1])
    for k, (kind, seed, jobs) in enumerate(steps):
        if kind == "equal queues":  # an equal configuration, new objects: another tree
            queues = queues_for(steps[0][1])
        elif kind == "new queues":
            queues = queues_for(seed)
        elif kind == "equal nodes":
            nodes = tuple(nodes_for(steps[0][1]).nodes)
        elif kind == "new nodes":
            cluster = nodes_for(seed)
            nodes = tuple(cluster.nodes)
        elif kind == "run":
            try:
                cluster.run(job(f"r{k}").queue("a").gpus(1 + seed % 2))
            except AssertionError:
                pass  # no room: nothing more runs
        pending = tuple(pending_for(s, i).pending(i) for i, s in enumerate(jobs))
        running = tuple(r for r in cluster.running if all(rp.node in {n.name for n in nodes} for rp in r.placement))
        snap = Snapshot(now=float(k), nodes=nodes, queues=queues, running=running, pending=pending)
        got = verdicts(snap)
        kept, nominate_mod.memo_verdicts = nominate_mod._kept_verdicts, False
        try:
            want = verdicts(snap)
        finally:
            nominate_mod._kept_verdicts, nominate_mod.memo_verdicts = kept, True
        assert got == want, (k, kind)
        HITS["cycles"] += 1
        HITS["unschedulable"] += sum(v is not None for _, v in got)


HITS = {"cycles": 0, "unschedulable": 0}


def test_the_memo_was_used() -> None:
    """The property ran many cycles, some of them with jobs that could never start."""
    HITS.update(cycles=0, unschedulable=0)
    test_kept_verdicts_equal_the_fresh_ones()
    assert HITS["cycles"] > 200 and HITS["unschedulable"] > 30, HITS
