"""The failed-victim-search memo (``_Cycle._search_known_to_fail``) answers a job only where its own
search would fail too: checked on the two smallest backlogs (cut down from shuffled
``share_backlogs.backlog`` seeds 214 and 773) where it did not, against the same cycle with every
search run (the reference, docs/queue-semantics.md §A3).

- Victims claimed by another queue's preemptor in the same cycle count as gone for a later search
  (§A3.6), so room a failed search lacked can appear with each claim: a failed search stays valid
  only while no victim is claimed from a queue other than its own (``_Cycle._own_stamp``).
- A share's failure answers the same share of other users unless their own cards were met
  (``ShareBook.readers``); where a verdict answered its search, the users whose cards that verdict's
  search met (``_Cycle.verdict_met``) count as met too: before, none did.
- Under fair sharing every change of the cycle's copy can move the shares a fair search reads: a
  verdict holds only until the next change (checked over ``share_backlogs.backlog`` under fair sharing).
"""

from __future__ import annotations

import dataclasses

import pytest
from labgang.launcher.model import JobRequest, SharingPolicy
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.nominate import Entry
from labgang.launcher.scheduler.snapshot import PendingJob, RankPlacement, RunningJob, Snapshot
from share_backlogs import NODES, SHARING, backlog, queues

Running = tuple[str, str, JobRequest, str, tuple[int, ...], str]
Pending = tuple[str, str, JobRequest, int, float, int, str]


def gpus(n: int) -> JobRequest:
    return JobRequest(per_worker=n)


def shards(n: int) -> JobRequest:
    return JobRequest(shards=n)


def mps(n: int) -> JobRequest:
    return JobRequest(mps=n)


def snapshot(running: list[Running], pending: list[Pending]) -> Snapshot:
    """Queues, nodes and sharing of ``share_backlogs``; running: (id, queue, request, node, card
    numbers, user), submitted and admitted at the number in the id; pending: (id, queue, request, priority, submit
    time, seq, user)."""
    jobs = tuple(
        RunningJob(jid, q, req, 0, at, at, (RankPlacement(0, n, tuple(f"GPU-{n}-{c}" for c in cards)),), user=u)
        for jid, q, req, n, cards, u in running
        for at in [float(jid[1:])]
    )
    waiting = tuple(
        PendingJob(jid, q, req, prio, at, seq, float(seq), user=u) for jid, q, req, prio, at, seq, u in pending
    )
    return Snapshot(200.0, NODES, queues(), jobs, waiting, gpu_sharing=SHARING)


def every_search_run(snap: Snapshot, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as m:
        m.setattr(cycle_module._Cycle, "_search_known_to_fail", lambda self, e: False)
        return run_cycle(snap)


def test_a_claim_from_another_queue_ends_a_failed_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """p9 (queue c, 1 gpu, priority 10) finds no victims; p29 (queue b) then claims b's own r5, r4
    and r3; p26 (c, 2 gpus, priority 10, submitted after p9) takes off c's own r12 and r0, b's
    claimed victims counted as gone. Before, p9's verdict answered p26 (no claim moved its stamp)."""
    snap = snapshot(
        [
            ("r0", "c", gpus(2), "n1", (0, 1), "u5"),
            ("r1", "e", shards(2), "n1", (2,), "u3"),
            ("r3", "b", shards(3), "n2", (0,), "u0"),
            ("r4", "b", gpus(2), "n2", (1, 2), "u0"),
            ("r5", "b", gpus(1), "n2", (3,), "u5"),
            ("r6", "b", shards(2), "n3", (0,), "u7"),
            ("r8", "e", shards(3), "n3", (2,), "u6"),
            ("r10", "a", shards(2), "n3", (1,), "u0"),
            ("r12", "c", gpus(1), "n3", (3,), "u2"),
        ],
        [
            ("p8", "d", shards(2), 5, 100.0, 108, "u2"),
            ("p9", "c", gpus(1), 10, 103.0, 109, "u5"),
            ("p12", "a", gpus(2), 10, 113.0, 112, "u1"),
            ("p13", "a", shards(3), 10, 115.0, 113, "u6"),
            ("p26", "c", gpus(2), 10, 131.0, 126, "u1"),
            ("p29", "b", shards(2), 10, 106.0, 129, "u4"),
        ],
    )
    got = run_cycle(snap)
    victims = {p.job_id: set(p.victims) for p in got.preempted}
    assert victims["p26"] == {"r12", "r0"}
    assert "p9" not in victims
    assert got == every_search_run(snap, monkeypatch)


def test_a_failure_answered_by_a_verdict_names_the_users_its_search_met(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure answered by another user's failed search verdict names, for the verdicts across
    users, the users whose cards that search met (``_Cycle.verdict_met``). backlog(544), found under
    cards charged held alone (``shares``): p39 finds a victim (r11) only by its own search, which reads
    its user's cards; when the answered failure does not name them (``verdict_met`` emptied, as
    before the fix), an earlier failure answers p39 too and it stays pending. (The case found under
    the earlier charge, ``ceil`` of a queue's summed shares, was a hand-built snapshot where p30 takes
    off a's r8; under cards held alone its cohort is full and nobody finds victims there.)"""
    snap = backlog(544)
    got = run_cycle(snap)
    assert "p39" in {p.job_id for p in got.preempted}
    assert got == every_search_run(snap, monkeypatch)
    known = cycle_module._Cycle._search_known_to_fail

    def unnamed(self: cycle_module._Cycle, e: Entry) -> bool:
        answered = known(self, e)
        if answered:
            self.verdict_met = frozenset()  # as before the fix: the users its search met not named
        return answered

    monkeypatch.setattr(cycle_module._Cycle, "_search_known_to_fail", unnamed)
    assert "p39" not in {p.job_id for p in run_cycle(snap).preempted}


def fair(seed: int) -> Snapshot:
    """``share_backlogs.backlog(seed)`` under fair sharing (its queues all in cohort lab)."""
    return dataclasses.replace(backlog(seed), sharing=SharingPolicy(fair_sharing=True))


# 181: a backlog where, under fair sharing, the same job's second search in the cycle (heads offer a
# job again) finds victims its first did not, after admissions that moved the shares a fair search
# reads (not epoch or claims); under fair sharing a verdict now holds only until the cycle's copy changes
@pytest.mark.parametrize("seed", [181, *range(40)])
def test_under_fair_sharing_verdicts_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = fair(seed)
    assert run_cycle(snap) == every_search_run(snap, monkeypatch)
