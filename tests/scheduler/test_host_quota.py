"""Host CPUs and memory in queue quotas, and ``--exclusive`` counting whole nodes, in the pure cycle
(launcher/host_quota.py, launcher/scheduler/hostquota.py): a queue that lists ``cpu``/``memory``
holds its jobs to them as it does to devices (nominal, borrowing in a cohort, reclaim from
borrowers, preemption in the queue); a queue that does not list them does not limit them."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.scheduler import ReasonCode, run_cycle
from sched_builders import Cluster, job, queue

GIB = 1024**3


def with_quota(q, **extra):
    """``q`` with ``extra`` host entries added to its nominal/borrowing/lending tables
    (``nominal_cpu=16``, ``borrowing_limit_memory=...``)."""
    tables = {
        "nominal": dict(q.nominal),
        "borrowing_limit": dict(q.borrowing_limit),
        "lending_limit": dict(q.lending_limit),
    }
    for key, value in extra.items():
        table, res = key.rsplit("_", 1)
        tables[table][res] = value
    return replace(q, **tables)


def big_node() -> Cluster:
    return Cluster().node("n1", 8, cpus=64, mem_gib=512)


def test_cpu_quota_holds_a_queue_to_its_nominal_cpus_with_numbers():
    q = with_quota(queue("q").nominal(gpu=8).build(), nominal_cpu=16)
    pending = [
        job("a").queue("q").gpus(1).host(cpus=12).submitted(1),
        job("b").queue("q").gpus(1).host(cpus=8).submitted(2),
    ]
    result = run_cycle(big_node().snapshot([q], pending))
    assert [a.job_id for a in result.admitted] == ["a"]  # the node has 64 CPUs: the quota is what stops b
    [waiting] = result.pending
    assert waiting.job_id == "b" and waiting.reason.code == ReasonCode.OVER_QUOTA
    assert waiting.reason.message == "q uses 12 cpu of the 16 cpu it may use; job needs 8 cpu"


def test_a_queue_that_lists_no_cpu_does_not_limit_cpus():
    q = queue("q").nominal(gpu=8).build()
    pending = [job(f"j{i}").queue("q").gpus(1).host(cpus=30).submitted(i) for i in range(2)]
    result = run_cycle(big_node().snapshot([q], pending))
    assert sorted(a.job_id for a in result.admitted) == ["j0", "j1"]


def test_memory_counts_mem_per_gpu_and_mem_once_per_node():
    q = with_quota(queue("q").nominal(gpu=8).build(), nominal_memory=100 * GIB)
    running = big_node().run(job("r").queue("q").gang(2, 1).host(mem_per_gpu_gib=20))  # 2 x 20 GiB
    pending = [
        job("fits").queue("q").gpus(1).host(mem_gib=60).submitted(1),  # 40 + 60 = 100
        job("over").queue("q").gpus(1).host(mem_gib=1).submitted(2),
    ]
    result = run_cycle(running.snapshot([q], pending))
    assert [a.job_id for a in result.admitted] == ["fits"]
    [waiting] = result.pending
    assert waiting.reason.code == ReasonCode.OVER_QUOTA
    assert waiting.reason.message == "q uses 100 GiB of the 100 GiB it may use; job needs 1 GiB"


def test_cpus_are_borrowed_within_a_cohort_up_to_the_borrowing_limit():
    a = with_quota(queue("a").nominal(gpu=4).cohort("lab").build(), nominal_cpu=8, borrowing_limit_cpu=8)
    b = with_quota(queue("b").nominal(gpu=4).cohort("lab").build(), nominal_cpu=24)
    pending = [
        job("borrower").queue("a").gpus(1).host(cpus=16).submitted(1),  # 8 own + 8 of b's idle cpus
        job("greedy").queue("a").gpus(1).host(cpus=1).submitted(2),  # a may not go past 8 + 8
    ]
    result = run_cycle(big_node().snapshot([a, b], pending))
    assert [x.job_id for x in result.admitted] == ["borrower"]
    [waiting] = result.pending
    assert waiting.reason.code == ReasonCode.OVER_QUOTA
    assert (
        "a uses 16 cpu of the 16 cpu it may use (nominal quota 8 cpu + borrowing limit 8 cpu)" in waiting.reason.message
    )


def test_a_queue_short_of_its_own_cpus_reclaims_them_from_a_borrower():
    a = with_quota(queue("a").nominal(gpu=4).cohort("lab").reclaim("any").build(), nominal_cpu=16)
    b = with_quota(queue("b").nominal(gpu=4).cohort("lab").build(), nominal_cpu=16)
    c = big_node().run(job("borrower").queue("b").gpus(1).host(cpus=28))  # 16 own + 12 of a's cpus; 1 gpu
    c = c.run(job("modest").queue("b").gpus(1).host(cpus=0))  # holds no cpu: never a victim for cpus
    result = run_cycle(c.snapshot([a, b], [job("owner").queue("a").gpus(1).host(cpus=16).submitted(5)]))
    assert result.admitted == ()
    [preempt] = result.preempted
    assert preempt.job_id == "owner" and preempt.victims == ("borrower",)


def test_cpus_within_the_borrowers_own_quota_are_not_reclaimed():
    a = with_quota(queue("a").nominal(gpu=4).cohort("lab").reclaim("any").build(), nominal_cpu=16)
    b = with_quota(queue("b").nominal(gpu=4).cohort("lab").build(), nominal_cpu=16)
    c = big_node().run(job("owner-b").queue("b").gpus(1).host(cpus=16))  # within b's own 16: not borrowing
    c = c.run(job("first-a").queue("a").gpus(1).host(cpus=10))
    result = run_cycle(c.snapshot([a, b], [job("second-a").queue("a").gpus(1).host(cpus=8).submitted(5)]))
    assert result.preempted == () and result.admitted == ()
    [waiting] = result.pending
    assert waiting.reason.code == ReasonCode.OVER_QUOTA or waiting.reason.code == ReasonCode.COHORT_EXHAUSTED
    assert "cpu" in waiting.reason.message


def test_a_higher_priority_job_short_of_cpu_quota_preempts_within_its_queue():
    q = with_quota(queue("q").nominal(gpu=8).within_queue("lower-priority").build(), nominal_cpu=16)
    c = big_node().run(job("low").queue("q").gpus(1).host(cpus=12).priority(0))
    result = run_cycle(c.snapshot([q], [job("high").queue("q").gpus(1).host(cpus=8).priority(10).submitted(5)]))
    [preempt] = result.preempted
    assert preempt.job_id == "high" and preempt.victims == ("low",)


def test_exclusive_counts_the_whole_node_against_the_gpu_quota():
    q = queue("q").nominal(gpu=6).build()
    c = Cluster().node("n1", 4, cpus=32, mem_gib=128).node("n2", 4, cpus=32, mem_gib=128)
    c = c.run(job("whole").queue("q").gpus(1).host(exclusive=True))  # holds n1 whole: 4 GPUs counted
    pending = [
        job("three").queue("q").gpus(3).submitted(1),  # 4 + 3 > 6: over quota, though n2 is idle
        job("two").queue("q").gpus(2).submitted(2),
    ]
    result = run_cycle(c.snapshot([q], pending))
    assert [a.job_id for a in result.admitted] == ["two"]
    reasons = {p.job_id: p.reason for p in result.pending}
    assert reasons["three"].code == ReasonCode.OVER_QUOTA
    assert reasons["three"].message == "q uses 4 of 6 gpu; job needs 3"


def test_an_exclusive_job_whose_whole_node_is_over_quota_waits_saying_so():
    q = with_quota(queue("q").nominal(gpu=8).build(), nominal_cpu=40)
    c = Cluster().node("n1", 4, cpus=64, mem_gib=128)
    result = run_cycle(c.snapshot([q], [job("x").queue("q").gpus(1).host(cpus=2, exclusive=True).submitted(1)]))
    assert result.admitted == ()
    [waiting] = result.pending
    assert waiting.reason.code == ReasonCode.OVER_QUOTA
    assert waiting.reason.message == "q uses 0 cpu of the 40 cpu it may use; job needs 64 cpu"  # the whole node


def test_a_request_no_quota_could_ever_hold_is_unschedulable_naming_the_field():
    from labgang.launcher.scheduler.quota import QuotaBook
    from labgang.launcher.scheduler.unschedulable import quota_fault_field, quota_never_fits

    a = with_quota(queue("a").nominal(gpu=4).cohort("lab").build(), nominal_cpu=8, nominal_memory=64 * GIB)
    b = with_quota(queue("b").nominal(gpu=4).cohort("lab").build(), nominal_cpu=8)  # lends its 8 cpus
    book = QuotaBook([a, b])
    cpus = job("x").queue("a").gpus(1).host(cpus=17).request  # 8 own + 8 borrowable < 17
    reason = quota_never_fits(book, "a", cpus)
    assert reason is not None and reason.code == ReasonCode.UNSCHEDULABLE
    assert reason.message == "job needs 17 cpu but queue a can hold at most 16 cpu (cpu quota)"
    assert quota_fault_field(book, "a", cpus) == "cpus_per_task"
    memory = job("y").queue("a").gpus(2).host(mem_per_gpu_gib=40).request
    assert quota_never_fits(book, "a", memory).message == (
        "job needs 80 GiB but queue a can hold at most 64 GiB (memory quota)"
    )
    assert quota_fault_field(book, "a", memory) == "mem_per_gpu"
    assert quota_never_fits(book, "a", job("z").queue("a").gpus(1).host(cpus=16).request) is None
    assert quota_never_fits(book, "b", job("w").queue("b").gpus(1).host(mem_gib=999).request) is None  # b: no limit


def test_an_exclusive_job_waiting_for_whole_nodes_of_gpus_says_exclusive():
    q = queue("q").nominal(gpu=7).build()
    c = Cluster().node("n1", 8, cpus=64, mem_gib=128)
    result = run_cycle(c.snapshot([q], [job("x").queue("q").gpus(1).host(exclusive=True).submitted(1)]))
    assert result.admitted == ()
    [waiting] = result.pending
    assert waiting.reason.message.endswith("job needs 8 gpu (--exclusive takes whole nodes)"), waiting.reason
