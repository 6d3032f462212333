"""Jobs of groups share a scheduling class whatever their group names (issue 27, speed): a plain
job of groups (one device size per rank, no placement constraints) whatever its cut into groups,
any other job of groups with every other job of its shape (``groups.group_class``). The class's
failure answers its later jobs, each in its own words: the reason is kept as a template
(``groups.reason_template`` / ``NEED_MARK``) and ``groups.render`` puts each job's names and need in.

Pinned against the unshared answer: the cycle with classes keyed by the exact groups (names and
cut), search failures likewise, and reasons built from each job's own request, as before."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import nominate as nominate_module
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.groups import group_class, reason_template, render
from labgang.launcher.scheduler.snapshot import Snapshot
from labgang.launcher.simulate import Simulation, parse_scenario
from sched_builders import Cluster, job, queue


@contextmanager
def unshared() -> Iterator[None]:
    """The cycle as it was before classes ignored group names: a job of groups's class, search key
    and reason come from its exact groups (a plain one's search key its plain size, not the gang's)."""

    def exact(req: JobRequest) -> object:
        return (req.groups, req.colocate) if req.groups else ()

    patches = [
        (nominate_module, "group_class", exact),
        (nominate_module, "plain_gang_of", lambda req: None),
        (cycle_module, "group_shape", exact),
        (cycle_module, "reason_template", lambda req: req),
        (cycle_module, "NEED_MARK", ""),
        (cycle_module, "plain_gang", lambda req: None),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    for module, name, value in patches:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


EXAMPLES = int(os.environ.get("LABGANG_HYPOTHESIS_EXAMPLES", "200"))  # as test_properties.py

NAMES = ["launcher", "worker", "actor", "learner", "a", "b", "g0", "g1", "x-1"]


@st.composite
def group_heavy(draw) -> dict:
    """A small cluster in a cohort (quota and capacity both short) and a backlog mostly of jobs of
    groups drawn from a few sizes, each cut and named at random, so classes meet many cuts."""
    nodes = [{"name": f"n{i}", "gpus": draw(st.integers(1, 8))} for i in range(draw(st.integers(1, 3)))]
    queues = []
    for i in range(draw(st.integers(1, 3))):
        q = {
            "name": f"q{i}",
            "nominal": {"gpu": draw(st.sampled_from([1, 2, 4, 6]))},
            "within_queue": draw(st.sampled_from(["never", "lower-priority", "lower-or-newer-equal-priority"])),
            "queueing": draw(st.sampled_from(["best-effort-fifo", "best-effort-fifo", "strict-fifo"])),
            "cohort": "lab",
            "reclaim_within_cohort": draw(st.sampled_from(["never", "lower-priority", "any"])),
        }
        if draw(st.booleans()):
            q["borrowing_limit"] = {"gpu": draw(st.integers(0, 4))}
        if draw(st.integers(0, 4)) == 0:
            q["starvation_after"] = float(draw(st.integers(5, 20)))
        queues.append(q)
    jobs = []
    for i in range(draw(st.integers(2, 14))):
        j: dict = {
            "id": f"j{i}",
            "queue": f"q{draw(st.integers(0, len(queues) - 1))}",
            "priority": draw(st.integers(-1, 1)),
            "submit": float(draw(st.integers(0, 10))),
            "duration": float(draw(st.integers(1, 20))),
        }
        if draw(st.integers(0, 4)) == 0:  # a one-group job now and then
            j["workers"], j["gpus_per_worker"] = draw(st.integers(1, 4)), draw(st.sampled_from([1, 2]))
            jobs.append(j)
            continue
        ranks, per = draw(st.integers(2, 5)), draw(st.sampled_from([1, 1, 2]))
        cuts = sorted(draw(st.sets(st.integers(1, ranks - 1), max_size=2)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, ranks], strict=True)]
        bare = draw(st.integers(0, 2)) == 0 or len(sizes) == 1
        names = draw(st.permutations(NAMES))[: len(sizes) + bare]
        groups = [{"name": names[0], "workers": 1, "gpus_per_worker": 0}] if bare else []
        groups += [{"name": n, "workers": k, "gpus_per_worker": per} for n, k in zip(names[bare:], sizes, strict=True)]
        kind = draw(st.integers(0, 5))
        if kind == 0:  # not plain: one group needs a topology level (a class of its shape only)
            groups[-1]["topology"] = "node"
        elif kind == 1 and len(groups) > 1:  # not plain: two groups on one node
            j["colocate"] = [[groups[0]["name"], groups[1]["name"]]]
        j["groups"] = groups
        jobs.append(j)
    return {"scenario": {"name": "group classes"}, "nodes": nodes, "queues": queues, "jobs": jobs}


def same_as_unshared(snap: Snapshot, result: CycleResult) -> None:
    with unshared():
        reference = run_cycle(snap)
    assert result == reference


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group_heavy())
def test_classes_across_group_names_and_cuts_change_no_decision_and_no_reason(data: dict) -> None:
    sim = Simulation(parse_scenario(data))
    sim.add_cycle_hook(same_as_unshared)
    steps = 0
    while sim.next_time() is not None:
        sim.run_instant()
        steps += 1
        assert steps < 2_000


def test_one_failure_answers_every_cut_in_its_own_words(monkeypatch) -> None:
    """Three plain jobs of 5 x 1 gpu, cut and named differently, over what the cohort lends: one is tried, the
    other two answered from its failure, each reason naming the job's own groups."""
    q = queue("q").nominal(gpu=4).cohort("lab").build()
    other = queue("o").nominal(gpu=4).cohort("lab").build()
    c = Cluster().node("n1", gpus=8).node("n2", gpus=8).run(job("r").queue("o").gpus(4))
    one = JobRequest(workers=1)
    a = job("a").queue("q").groups(("launcher", JobRequest(workers=1, per_worker=0)), ("w", one.at_size(5)))
    b = job("b").queue("q").groups(("p", one.at_size(2)), ("r", one.at_size(3)))
    d = job("d").queue("q").groups(("r", one.at_size(2)), ("p", one.at_size(3)))
    tried: list[str] = []
    real = cycle_module._Cycle._try_job

    def counting(self, e):
        tried.append(e.job.id)
        return real(self, e)

    monkeypatch.setattr(cycle_module._Cycle, "_try_job", counting)
    snap = c.snapshot([q, other], [a, b, d], now=10.0)
    result = run_cycle(snap)
    assert group_class(b.request) == group_class(d.request)  # the same plain size
    assert tried == ["a", "b"], tried  # d is answered from b's failure
    reasons = {p.job_id: p.reason for p in result.pending}
    assert reasons["b"].code is ReasonCode.COHORT_EXHAUSTED
    assert reasons["b"].message.endswith("job needs 5 (groups p 2 x 1 + r 3 x 1 = 2 + 3)"), reasons["b"].message
    assert reasons["d"].message.endswith("job needs 5 (groups r 2 x 1 + p 3 x 1 = 2 + 3)"), reasons["d"].message
    with unshared():
        assert run_cycle(snap) == result


def test_a_template_rendered_is_the_reason_built_from_the_job_itself() -> None:
    """A capacity reason names the group that does not fit: built once for the shape, rendered
    with each job's names it is what the job's own request gives."""
    c = Cluster().node("n1", gpus=4).node("n2", gpus=4)
    q = queue("q").nominal(gpu=16).build()
    for names in (("learner", "actors"), ("actors", "learner"), ("a", "x-1")):
        j = (
            job("j")
            .queue("q")
            .groups(
                (names[0], JobRequest(workers=1, per_worker=4)),
                (names[1], JobRequest(workers=3, per_worker=2, topology="node")),
            )
        )
        [own] = run_cycle(c.snapshot([q], [j])).pending
        with unshared():
            [plain] = run_cycle(c.snapshot([q], [j])).pending
        assert own == plain
        assert names[1] in own.reason.message, own.reason.message
        template = reason_template(j.request)
        assert {g.name for g in template.groups}.isdisjoint(names)
        assert render(own.reason, j.request) is own.reason  # nothing left to put in


def test_a_capacity_reason_answers_only_jobs_of_its_own_shape() -> None:
    """A gang of 6 x 1 gpu and jobs of groups of that plain size share a class, but a capacity
    reason says how each job's groups are cut: the gang's failure does not answer them, nor one
    cut's another's; each gets what it would get alone."""
    q = queue("q").nominal(gpu=16).build()
    c = Cluster().node("n1", gpus=4).node("n2", gpus=4).run(job("r").queue("q").gpus(4))
    one = JobRequest(workers=1)
    gang = job("gang").queue("q").gang(6, 1).priority(2)
    cut = job("cut").queue("q").groups(("p", one.at_size(2)), ("r", one.at_size(4))).priority(1)
    other = job("other").queue("q").groups(("a", one.at_size(3)), ("b", one.at_size(3)))
    same = job("same").queue("q").groups(("x", one.at_size(3)), ("y", one.at_size(3)))
    snap = c.snapshot([q], [gang, cut, other, same])
    result = run_cycle(snap)
    reasons = {p.job_id: p.reason for p in result.pending}
    assert len({group_class(j.request) for j in (cut, other, same)}) == 1
    assert reasons["gang"].code is ReasonCode.NO_CAPACITY
    assert "groups p 2 x 1 + r 4 x 1" in reasons["cut"].message, reasons["cut"].message
    assert "groups a 3 x 1 + b 3 x 1" in reasons["other"].message, reasons["other"].message
    assert "groups x 3 x 1 + y 3 x 1" in reasons["same"].message, reasons["same"].message
    with unshared():
        assert run_cycle(snap) == result
