"""A job that would have to borrow looks for no victims (docs/queue-semantics.md §A3.1), and its
pending reason says so with the numbers: the typed ``PendingReason.no_preemption`` the cycle
itself produces, which ``labgang explain`` shows."""

from labgang.launcher.lifecycle.records import JobStatus
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.decisions import NoPreemption, NoPreemptionCode, ReasonCode
from sched_builders import Cluster, job, queue

# team-a and team-b share cohort "lab" (2 + 2 gpu); team-a may evict its own lower-priority jobs
TEAM_B = queue("team-b").cohort("lab").nominal(gpu=2).build()


def team_a(borrow_within_cohort: str | None = None):
    b = queue("team-a").cohort("lab").nominal(gpu=2).within_queue("lower-priority")
    if borrow_within_cohort is not None:
        b = b.borrow_within_cohort(borrow_within_cohort)
    return b.build()


def cluster_with_a0() -> Cluster:
    """One 4-GPU node; team-a's a0 (2 gpu, priority 0) runs, team-b is idle."""
    return Cluster().node("n1", 4).run(job("a0").queue("team-a").gpus(2).priority(0).submitted(-10.0))


def test_a_job_that_would_borrow_waits_with_the_rule_and_its_numbers() -> None:
    # a1 needs 4: 2 above team-a's nominal 2. Only a0 (lower priority) could be evicted, and with
    # a0 gone a1 would fit (team-b lends its idle 2): the borrowing rule alone keeps it waiting.
    snap = cluster_with_a0().snapshot([team_a(), TEAM_B], [job("a1").queue("team-a").gpus(4).priority(10)])
    result = run_cycle(snap)
    assert result.admitted == () and result.preempted == ()
    (pending,) = result.pending
    assert pending.reason.code is ReasonCode.COHORT_EXHAUSTED
    refusal = pending.reason.no_preemption
    assert refusal == NoPreemption(
        NoPreemptionCode.WOULD_BORROW,
        "team-a",
        "gpu",
        4,
        2,
        "lab",
        "never",
        "no preemption: the job needs 4 gpu, 2 above queue team-a's nominal quota of 2, so it could only "
        "start by borrowing; a job that would borrow may preempt only when its queue's borrow_within_cohort "
        "allows it, and team-a's is never (docs/queue-semantics.md §A3.1)",
    )
    assert refusal.borrow == 2
    assert refusal.facts()["code"] == "would_borrow" and refusal.facts()["borrow"] == 2


def test_the_same_job_preempts_once_borrow_within_cohort_allows_it() -> None:
    # the control for the case above: the rule is exactly what kept a1 from evicting a0
    snap = cluster_with_a0().snapshot(
        [team_a("lower-priority"), TEAM_B], [job("a1").queue("team-a").gpus(4).priority(10)]
    )
    result = run_cycle(snap)
    assert [p.victims for p in result.preempted] == [("a0",)]
    assert all(p.reason.no_preemption is None for p in result.pending)


def test_a_job_within_its_nominal_quota_that_finds_no_victim_says_nothing_about_borrowing() -> None:
    # the near case: team-b's b0 fills the node with a0; a2 (2 gpu = team-a's nominal) looks for
    # victims, finds none (a0 has its priority, b0 is another queue and team-a never reclaims),
    # and waits without a preemption rule to blame
    c = cluster_with_a0().run(job("b0").queue("team-b").gpus(2).submitted(-5.0))
    result = run_cycle(c.snapshot([team_a(), TEAM_B], [job("a2").queue("team-a").gpus(2).priority(0)]))
    assert result.preempted == ()
    (pending,) = result.pending
    assert pending.reason.code is ReasonCode.COHORT_EXHAUSTED
    assert pending.reason.no_preemption is None


def test_a_job_that_waits_for_devices_while_it_would_borrow_says_it_too() -> None:
    # quota fits (team-b lends 2), devices do not: 2 of the 4 GPUs hold a job of a queue outside
    # the cohort. a1 would still have to borrow, so it does not look for victims either.
    solo = queue("solo").nominal(gpu=2).build()
    c = Cluster().node("n1", 4).run(job("s0").queue("solo").gpus(2))
    result = run_cycle(c.snapshot([team_a(), TEAM_B, solo], [job("a1").queue("team-a").gpus(4).priority(10)]))
    (pending,) = result.pending
    assert pending.reason.code is ReasonCode.NO_CAPACITY
    assert pending.reason.no_preemption is not None
    assert pending.reason.no_preemption.code is NoPreemptionCode.WOULD_BORROW


def test_the_reason_survives_the_status_round_trip_through_the_store_text() -> None:
    snap = cluster_with_a0().snapshot([team_a(), TEAM_B], [job("a1").queue("team-a").gpus(4).priority(10)])
    refusal = run_cycle(snap).pending[0].reason.no_preemption
    status = JobStatus(reason_code="cohort_exhausted", reason_message="m", no_preemption=refusal)
    assert JobStatus.from_json(status.to_json()) == status
    assert JobStatus.from_json(JobStatus().to_json()).no_preemption is None
