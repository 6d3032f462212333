"""The phases' and states' order and flags (``RankPhase.order`` and ``ended``, ``JobState.finished``
and ``holds_devices``) are plain attributes of each member, set once after their class (the rules
read them tens of times a job): each member has its own."""

from __future__ import annotations

from labgang.launcher.lifecycle.states import JobState, RankPhase


def test_every_phase_has_its_forward_order() -> None:
    """The forward order, GONE and LOST both last."""
    assert [(p, p.order) for p in RankPhase] == [
        (RankPhase.ASSIGNED, 0),
        (RankPhase.LAUNCHING, 1),
        (RankPhase.RUNNING, 2),
        (RankPhase.EXITED, 3),
        (RankPhase.GONE, 4),
        (RankPhase.LOST, 4),
    ]


def test_every_phase_and_state_has_its_flags() -> None:
    assert [p for p in RankPhase if p.ended] == [RankPhase.GONE, RankPhase.LOST]
    assert [s for s in JobState if s.finished] == [
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
    ]
    assert [s for s in JobState if s.holds_devices] == [JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING]
