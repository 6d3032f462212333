"""The cycle as a whole: ordering, reasons with numbers, holding quota, starvation, idempotency."""

import pytest
from labgang.launcher.scheduler import ReasonCode, check_schedulable, run_cycle
from labgang.launcher.scheduler.snapshot import PendingJob, RunningJob
from sched_builders import Cluster, job, queue


def reasons(result) -> dict[str, tuple[ReasonCode, str]]:
    return {p.job_id: (p.reason.code, p.reason.message) for p in result.pending}


def test_every_pending_job_is_answered_once():
    q = queue("q").nominal(gpu=4).build()
    c = Cluster().node("n1", 4)
    result = run_cycle(c.snapshot([q], [job(f"j{i}").queue("q").gpus(1 + i % 3) for i in range(6)]))
    ids = [a.job_id for a in result.admitted] + [p.job_id for p in result.pending]
    assert sorted(ids) == sorted(f"j{i}" for i in range(6))


@pytest.mark.parametrize(
    "setup,want_code,want_text",
    [
        pytest.param(
            "borrow-limit",
            ReasonCode.OVER_QUOTA,
            "team-a uses 5 gpu of the 5 it may use (nominal quota 3 + borrowing limit 2); job needs 1",
            id="over-quota",
        ),
        pytest.param(
            "cohort",
            ReasonCode.COHORT_EXHAUSTED,
            "cohort lab has 0 of 8 lendable gpu unused; "
            "team-a uses 2 (+1 held for job x, kept from borrowers this cycle only) of 3 gpu "
            "and can get 0 more; job needs 1",
            id="cohort",
        ),
        pytest.param("fragmented", ReasonCode.FRAGMENTED, "6 gpu free, largest node has 3", id="fragmented"),
        pytest.param("capacity", ReasonCode.NO_CAPACITY, "2 gpu free; job needs 1 x 4 gpu", id="no-capacity"),
        pytest.param("never", ReasonCode.UNSCHEDULABLE, "queue team-a can hold at most 5", id="unschedulable-quota"),
    ],
)
def test_pending_reasons_carry_numbers(setup, want_code, want_text):
    a = queue("team-a").cohort("lab").nominal(gpu=3).borrowing_limit(gpu=2).build()
    b = queue("team-b").cohort("lab").nominal(gpu=5).build()
    c = Cluster().node("n1", 8)
    pending = []
    if setup == "borrow-limit":
        for i in range(5):
            c.run(job(f"a{i}").queue("team-a").gpus(1))
        pending = [job("x").queue("team-a").gpus(1)]
    elif setup == "cohort":
        c.run(job("b").queue("team-b").gpus(6))
        c.run(job("a").queue("team-a").gpus(2))
        pending = [job("x").queue("team-a").gpus(1)]
    elif setup == "fragmented":
        c = Cluster().node("n1", 4).node("n2", 4)
        c.run(job("f1").queue("team-b").gang(2, 1).nodes(2))
        pending = [job("x").queue("team-a").gpus(4)]
        a = queue("team-a").nominal(gpu=8).build()
    elif setup == "capacity":
        c = Cluster().node("n1", 4)
        c.run(job("f1").queue("team-b").gpus(2))
        a = queue("team-a").nominal(gpu=8).build()
        pending = [job("x").queue("team-a").gpus(4)]
    elif setup == "never":
        pending = [job("x").queue("team-a").gpus(6)]
    result = run_cycle(c.snapshot([a, b], pending))
    code, text = reasons(result)["x"]
    assert code is want_code
    assert want_text in text


def test_within_nominal_before_borrowers_then_priority():
    # lender b's own job (within nominal) is admitted before a's borrowing job with higher priority
    a = queue("a").cohort("lab").nominal(gpu=2).build()
    b = queue("b").cohort("lab").nominal(gpu=2).build()
    c = Cluster().node("n1", 4)
    c.run(job("a-run").queue("a").gpus(2))
    result = run_cycle(
        c.snapshot(
            [a, b], [job("a-borrow").queue("a").gpus(2).priority(100), job("b-own").queue("b").gpus(2).priority(0)]
        )
    )
    assert [x.job_id for x in result.admitted] == ["b-own"]


def test_no_overadmission_within_one_cycle():
    alpha = queue("alpha").cohort("eng").nominal(gpu=50).borrowing_limit(gpu=50).build()
    beta = (
        queue("beta")
        .cohort("eng")
        .nominal(gpu=50)
        .borrowing_limit(gpu=10)
        .reclaim("any")
        .within_queue("lower-priority")
        .build()
    )
    c = Cluster().node("n1", 100)
    result = run_cycle(
        c.snapshot([alpha, beta], [job("a").queue("alpha").gang(45, 1), job("b").queue("beta").gang(56, 1)])
    )
    assert [x.job_id for x in result.admitted] == ["a"]


def test_strict_fifo_head_blocks_but_unschedulable_head_does_not():
    q = queue("q").nominal(gpu=4).strict().build()
    c = Cluster().node("n1", 4)
    c.run(job("r").queue("q").gpus(2))
    result = run_cycle(
        c.snapshot([q], [job("head").queue("q").gpus(4).submitted(1.0), job("small").queue("q").gpus(1).submitted(2.0)])
    )
    assert not result.admitted
    assert reasons(result)["small"][0] is ReasonCode.BLOCKED_BY_HEAD
    result = run_cycle(
        c.snapshot([q], [job("huge").queue("q").gpus(9).submitted(1.0), job("small").queue("q").gpus(1).submitted(2.0)])
    )
    assert [x.job_id for x in result.admitted] == ["small"]
    assert reasons(result)["huge"][0] is ReasonCode.UNSCHEDULABLE


def test_best_effort_lets_later_jobs_pass_a_stuck_head():
    q = queue("q").nominal(gpu=4).build()
    c = Cluster().node("n1", 4)
    c.run(job("r").queue("q").gpus(2))
    result = run_cycle(
        c.snapshot([q], [job("head").queue("q").gpus(4).submitted(1.0), job("small").queue("q").gpus(1).submitted(2.0)])
    )
    assert [x.job_id for x in result.admitted] == ["small"]


def test_waiting_head_holds_its_idle_quota_against_borrowers():
    # lender's head (3 GPUs) cannot get its quota back (reclaim never): it holds lender's idle
    # quota for the cycle, so a borrower from another queue does not take it in the same cycle
    lender = queue("lender").cohort("lab").nominal(gpu=4).build()
    borrower = queue("borrower").cohort("lab").nominal(gpu=4).build()
    c = Cluster().node("n1", 8)
    c.run(job("b-big").queue("borrower").gpus(6))
    result = run_cycle(
        c.snapshot(
            [lender, borrower],
            [job("l-head").queue("lender").gpus(3), job("b-more").queue("borrower").gpus(1).submitted(5.0)],
        )
    )
    assert result.admitted == ()
    code, _text = reasons(result)["b-more"]
    assert code is ReasonCode.COHORT_EXHAUSTED


def test_lender_with_reclaim_any_evicts_the_borrower_instead_of_holding():
    lender = queue("lender").cohort("lab").nominal(gpu=4).reclaim("any").build()
    borrower = queue("borrower").cohort("lab").nominal(gpu=4).build()
    c = Cluster().node("n1", 8)
    c.run(job("b-big").queue("borrower").gpus(6))
    result = run_cycle(c.snapshot([lender, borrower], [job("l-head").queue("lender").gpus(3)]))
    assert result.preempted[0].victims == ("b-big",)


def test_preemptor_is_idempotent_on_reflected_snapshot():
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 4)
    c.run(job("low").queue("q").gpus(4).priority(0))
    first = run_cycle(c.snapshot([q], [job("hi").queue("q").gpus(2).priority(9)]))
    assert first.preempted[0].victims == ("low",)
    # reflect: victim terminating, preemptor nominated
    low = c.running[0]
    c.running = [RunningJob(**{**{f: getattr(low, f) for f in low.__slots__}, "terminating": True})]
    second = run_cycle(c.snapshot([q], [job("hi").queue("q").gpus(2).priority(9).nominated("low")]))
    assert second.preempted == () and second.admitted == ()
    assert reasons(second)["hi"][0] is ReasonCode.WAITING_FOR_VICTIMS
    # victim gone: the preemptor starts
    c.running = []
    third = run_cycle(c.snapshot([q], [job("hi").queue("q").gpus(2).priority(9).nominated("low")]))
    assert [a.job_id for a in third.admitted] == ["hi"]


def test_admitted_snapshot_yields_nothing_new():
    q = queue("q").nominal(gpu=4).build()
    c = Cluster().node("n1", 4)
    first = run_cycle(c.snapshot([q], [job("a").queue("q").gpus(2), job("b").queue("q").gpus(4)]))
    assert [a.job_id for a in first.admitted] == ["a"]
    c.running = [RunningJob("a", "q", job("a").gpus(2).request, 0, 0.0, 0.0, first.admitted[0].placement)]
    again = run_cycle(c.snapshot([q], [job("b").queue("q").gpus(4)]))
    assert again.admitted == () and again.preempted == ()


def test_starving_gang_reserves_devices_small_jobs_cannot_use():
    q = queue("q").nominal(gpu=4).starvation_after(20.0).build()
    c = Cluster().node("n1", 4)
    c.run(job("s1").queue("q").gpus(1))
    c.run(job("s2").queue("q").gpus(1))
    pending = [job("big").queue("q").gpus(4).submitted(0.0), job("small").queue("q").gpus(1).submitted(25.0)]
    not_yet = run_cycle(c.snapshot([q], pending, now=19.0))
    assert [a.job_id for a in not_yet.admitted] == ["small"]
    starving = run_cycle(c.snapshot([q], pending, now=20.0))
    assert starving.admitted == ()
    code, text = reasons(starving)["small"]
    assert code is ReasonCode.RESERVED_FOR_STARVING and "big" in text


def test_same_snapshot_same_decisions():
    a = queue("a").cohort("lab").nominal(gpu=4).reclaim("any").within_queue("lower-priority").build()
    b = queue("b").cohort("lab").nominal(gpu=4).reclaim("lower-priority").build()
    c = Cluster().node("n1", 4).node("n2", 4)
    for i in range(3):
        c.run(job(f"b{i}").queue("b").gpus(2).priority(i))
    snap = c.snapshot([a, b], [job(f"p{i}").queue("a" if i % 2 else "b").gpus(1 + i % 3).priority(i) for i in range(8)])
    assert run_cycle(snap) == run_cycle(snap)


def test_unknown_queue_is_unschedulable():
    c = Cluster().node("n1", 1)
    snap = c.snapshot([queue("q").nominal(gpu=1).build()], [])
    snap = type(snap)(
        snap.now, snap.nodes, snap.queues, (), (PendingJob("x", "nope", job("x").request, 0, 0.0, 0, 0.0),)
    )
    code, text = reasons(run_cycle(snap))["x"]
    assert code is ReasonCode.UNSCHEDULABLE and "'nope' does not exist" in text
    assert text.endswith("; `labgang update x Partition=QUEUE` moves it")  # what can be done about it


@pytest.mark.parametrize(
    "builder,want",
    [
        pytest.param(job("ok").gpus(2), None, id="fits"),
        pytest.param(job("big").gpus(5), "no placement for 1 x 5 gpu", id="no-node-that-large"),
        pytest.param(job("quota").gang(3, 4), "can hold at most 8", id="over-max-quota"),
        pytest.param(job("mig").mig("1g.10gb"), "no quota for mig-1g.10gb", id="unlisted-resource"),
    ],
)
def test_check_schedulable(builder, want):
    q = queue("q").cohort("lab").nominal(gpu=4).build()
    other = queue("o").cohort("lab").nominal(gpu=4).build()
    nodes = Cluster().node("n1", 4).node("n2", 4).nodes
    reason = check_schedulable(builder.request, q, [q, other], nodes)
    if want is None:
        assert reason is None
    else:
        assert reason.code is ReasonCode.UNSCHEDULABLE and want in reason.message


def test_preempt_is_repeated_while_victims_do_not_show_as_terminating():
    q = queue("q").nominal(gpu=2).within_queue("lower-priority").build()
    c = Cluster().node("n1", 2)
    c.run(job("low").queue("q").gpus(2).priority(0))
    # the preemptor nominated `low`, but the snapshot still shows `low` running normally
    result = run_cycle(c.snapshot([q], [job("hi").queue("q").gpus(2).priority(9).nominated("low")]))
    assert [(p.job_id, p.victims) for p in result.preempted] == [("hi", ("low",))]
    assert reasons(result)["hi"][0] is ReasonCode.WAITING_FOR_VICTIMS


def test_a_hold_names_its_holder_and_keeps_only_borrowers_out():
    """A pending reason says which job holds its queue's idle quota and from whom: the hold keeps
    other queues' borrowers out for one cycle, while a smaller job of the same queue still starts;
    a queue without a cohort (nobody can borrow) holds nothing and claims nothing."""
    import dataclasses

    a = queue("team-a").cohort("lab").nominal(gpu=8).build()
    b = queue("team-b").cohort("lab").nominal(gpu=0).build()
    c = Cluster().node("n1", 8)
    c.run(job("r").queue("team-a").gpus(1))
    pending = [
        job("big").queue("team-a").gpus(8),
        job("small").queue("team-a").gpus(1),
        job("lend").queue("team-b").gpus(1),
    ]
    snap = c.snapshot([a, b], pending)
    first = run_cycle(snap)
    code, text = reasons(first)["big"]
    assert code is ReasonCode.COHORT_EXHAUSTED and "held for job big, kept from borrowers this cycle only" in text
    assert [x.job_id for x in first.admitted] == ["small"] and "lend" in reasons(first)
    spent = [dataclasses.replace(p, held_last_cycle=p.id in first.held) for p in snap.pending if p.id != "small"]
    second = run_cycle(dataclasses.replace(snap, pending=tuple(spent)))
    assert "lend" in [x.job_id for x in second.admitted]  # the hold lasted one cycle

    alone = queue("default").nominal(gpu=8).build()
    solo = Cluster().node("n1", 8)
    solo.run(job("r").queue("default").gpus(1))
    result = run_cycle(solo.snapshot([alone], [job("big").queue("default").gpus(8)]))
    assert reasons(result)["big"] == (ReasonCode.OVER_QUOTA, "default uses 1 of 8 gpu; job needs 8")
    assert result.held == ()


def test_starving_gang_reserves_only_nodes_whose_cpus_could_hold_it():
    """A starving job asking ``-c 8`` reserves on n2 (32 CPUs), never on n1, whose 4 CPUs could not
    hold it though its GPUs are all free; a small job then starts on n1, not on n2's reserved GPUs."""
    q = queue("q").nominal(gpu=8).starvation_after(20.0).build()
    c = Cluster().node("n1", 4, cpus=4).node("n2", 4, cpus=32)
    c.run(job("s1").queue("q").gpus(1).host(cpus=5))  # only n2 has 5 CPUs
    assert c.running[0].placement[0].node == "n2"
    pending = [
        job("big").queue("q").gpus(4).host(cpus=8).submitted(0.0),
        job("small").queue("q").gpus(1).host(cpus=1).submitted(25.0),
    ]
    result = run_cycle(c.snapshot([q], pending, now=30.0))
    assert [(a.job_id, a.placement[0].node) for a in result.admitted] == [("small", "n1")]
    code, text = reasons(result)["big"]
    assert code is not ReasonCode.UNSCHEDULABLE, text
