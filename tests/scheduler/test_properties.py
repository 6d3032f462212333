"""Property tests: random clusters (MIG included), queues and job mixes, driven through the
simulator so every cycle sees a realistic state; each cycle's decisions are checked.

Properties: no partial gang; no device given twice; no queue above nominal + borrowing limit;
no queue lending beyond its lending limit (a cohort's pool is never overdrawn); victims always
make room (the preemptor fits once they are gone); every job that fits an empty cluster is
admitted once the cluster drains; the same snapshot gives the same decisions.

``LABGANG_HYPOTHESIS_EXAMPLES`` sets the number of examples (default 200 keeps CI quick;
run with a few thousand by hand).
"""

from __future__ import annotations

import os
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from labgang.launcher.scheduler import check_schedulable, run_cycle
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.snapshot import Snapshot
from labgang.launcher.simulate import Simulation, parse_scenario

EXAMPLES = int(os.environ.get("LABGANG_HYPOTHESIS_EXAMPLES", "200"))
PROFILES = [["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], ["1g.10gb"] * 7, ["4g.40gb", "3g.40gb"]]


@st.composite
def scenarios(draw) -> dict:
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 3)) == 0:
            nodes.append({"name": f"m{i}", "gpus": draw(st.integers(1, 2)), "mig": draw(st.sampled_from(PROFILES))})
        else:
            nodes.append(
                {
                    "name": f"n{i}",
                    "gpus": draw(st.integers(1, 8)),
                    "model": draw(st.sampled_from(["NVIDIA A100", "NVIDIA H100"])),
                }
            )
    queues = []
    for i in range(draw(st.integers(1, 4))):
        q = {
            "name": f"q{i}",
            "nominal": {"gpu": draw(st.sampled_from([0, 2, 3, 4, 6, 8])), "mig-1g.10gb": draw(st.integers(0, 4))},
            "within_queue": draw(
                st.sampled_from(["never", "lower-priority", "lower-priority", "lower-or-newer-equal-priority"])
            ),
            "queueing": draw(st.sampled_from(["best-effort-fifo", "strict-fifo"])),
        }
        cohort = draw(st.sampled_from([None, "lab", "lab", "other"]))
        if cohort:
            q["cohort"] = cohort
            q["reclaim_within_cohort"] = draw(st.sampled_from(["never", "lower-priority", "any", "any"]))
            if draw(st.booleans()):
                q["borrowing_limit"] = {"gpu": draw(st.integers(0, 4))}
            if draw(st.booleans()):
                q["lending_limit"] = {"gpu": draw(st.integers(0, q["nominal"]["gpu"]))}
            if draw(st.integers(0, 3)) == 0:
                q["borrow_within_cohort"] = {
                    "policy": "lower-priority",
                    "max_priority_threshold": draw(st.integers(-1, 1)),
                }
        if draw(st.integers(0, 3)) == 0:
            q["starvation_after"] = float(draw(st.integers(5, 30)))
        queues.append(q)
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        j = {
            "id": f"j{i}",
            "queue": f"q{draw(st.integers(0, len(queues) - 1))}",
            "priority": draw(st.integers(-2, 2)),
            "submit": float(draw(st.integers(0, 20))),
            "duration": float(draw(st.integers(1, 30))),
            "grace": float(draw(st.sampled_from([0, 0, 3]))),
        }
        if draw(st.integers(0, 3)) == 0:
            j["workers"] = draw(st.integers(1, 3))
            j["mig"] = "1g.10gb"
        else:
            j["workers"] = draw(st.sampled_from([1, 1, 2, 2, 3, 4]))
            j["gpus_per_worker"] = draw(st.sampled_from([1, 1, 2, 2, 4]))
        jobs.append(j)
    return {"scenario": {"name": "random"}, "nodes": nodes, "queues": queues, "jobs": jobs}


def check_cycle(snap: Snapshot, result: CycleResult) -> None:
    """Assert every property of one cycle's decisions against its snapshot."""
    devices = {d.uuid: d for n in snap.nodes for d in n.devices}
    taken = {u: j.id for j in snap.running for r in j.placement for u in r.devices}
    pending = {p.id: p for p in snap.pending}
    usage: dict[tuple[str, str], int] = {}
    for j in snap.running:
        usage[(j.queue, j.request.resource)] = usage.get((j.queue, j.request.resource), 0) + j.request.total
    for adm in result.admitted:
        p = pending[adm.job_id]
        req = p.request
        # whole gang, right resource, never a device twice, never an unavailable one
        assert [r.rank for r in adm.placement] == list(range(req.workers))
        for r in adm.placement:
            assert len(r.devices) == req.per_worker
            for u in r.devices:
                assert devices[u].resource == req.resource and devices[u].node == r.node
                assert u not in taken, f"{u} given to {adm.job_id} and {taken.get(u)}"
                assert u not in snap.unavailable
                taken[u] = adm.job_id
        usage[(p.queue, req.resource)] = usage.get((p.queue, req.resource), 0) + req.total
    book = QuotaBook(snap.queues, usage)
    for q in snap.queues:
        for res in q.nominal:
            used = book.usage(q.name, res)
            limit = book.borrowing_limit(q.name, res)
            if limit is not None:
                assert used <= q.nominal[res] + limit, f"{q.name} uses {used} {res} > {q.nominal[res]} + {limit}"
    for cohort in {q.cohort for q in snap.queues if q.cohort}:
        for res in {r for q in snap.queues if q.cohort == cohort for r in q.nominal}:
            assert book.pool_usage(cohort, res) <= book.pool(cohort, res), f"cohort {cohort} lends beyond limits"
    # victims make room: with them gone, the preemptor alone is admitted
    for pre in result.preempted:
        gone = set(pre.victims)
        alone = replace(
            snap,
            running=tuple(j for j in snap.running if j.id not in gone),
            pending=(replace(pending[pre.job_id], nominated=()),),
        )
        again = run_cycle(alone)
        assert [a.job_id for a in again.admitted] == [pre.job_id], f"victims {pre.victims} make no room"
    # determinism
    assert run_cycle(snap) == result


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cycle_properties_and_drain(data):
    scenario = parse_scenario(data)
    sim = Simulation(scenario)
    sim.add_cycle_hook(check_cycle)
    steps = 0
    while sim.next_time() is not None:
        sim.run_instant()
        steps += 1
        assert steps < 10_000
    # drained: every job that could ever run has run to completion
    specs = {q.name: q for q in scenario.queues}
    nodes = scenario.nodes
    for j in sim.jobs.values():
        never = check_schedulable(j.request, specs[j.spec.queue], scenario.queues, nodes)
        if never is None:
            assert j.state == "finished", f"{j.id} is {j.state}: {j.reason}"
        else:
            assert j.state == "pending"
