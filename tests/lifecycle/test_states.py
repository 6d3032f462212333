"""The lifecycle's transitions table: every legal arrow works, every other one is refused."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from labgang.agent.supervisor.states import RankState
from labgang.launcher.lifecycle.states import (
    INTENT_REASON,
    JOB_MOVES,
    PAST_EXIT,
    EndIntent,
    IllegalTransition,
    JobState,
    RankPhase,
    advance,
    transition,
)

P, A, R, T = JobState.PENDING, JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING
S, F, C = JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED
TO, NF = JobState.TIMEOUT, JobState.NODE_FAIL

# Written out independently of JOB_MOVES: the arrows docs/queue-semantics.md §A5 describes.
LEGAL = {
    (P, A),  # a cycle admits it
    (P, C),  # cancelled while pending
    (P, S),  # requeued on a lost node's fence, then its agent reported the unheard ranks exited 0
    (A, R),  # every rank started
    (A, T),  # stopped before it ran (failed start, cancel, preemption, lost node, shutdown)
    (R, T),  # stopped
    (R, S),  # every rank gone, all exited 0
    (R, F),  # every rank gone, one exited non-zero
    (T, P),  # requeued (preempted, lost node, failed start, shutdown)
    (T, S),  # stopped after every rank had exited 0: decided by the exits
    (T, F),
    (T, C),
    (T, TO),  # stopped by its time limit
    (T, NF),  # a node lost, and the job asked for no requeue
}


@dataclass
class Status:
    state: JobState


@pytest.mark.parametrize(("src", "dst"), sorted(LEGAL))
def test_every_legal_move_is_taken(src: JobState, dst: JobState) -> None:
    st = Status(src)
    transition(st, dst)
    assert st.state is dst


ILLEGAL = sorted(set(itertools.product(JobState, JobState)) - LEGAL)


@pytest.mark.parametrize(("src", "dst"), ILLEGAL)
def test_every_illegal_move_is_refused_and_changes_nothing(src: JobState, dst: JobState) -> None:
    st = Status(src)
    with pytest.raises(IllegalTransition, match=f"{src.value} -> {dst.value}"):
        transition(st, dst)
    assert st.state is src


def test_the_table_is_exactly_the_documented_arrows() -> None:
    assert {(a, b) for a, moves in JOB_MOVES.items() for b in moves} == LEGAL
    assert len(ILLEGAL) == len(JobState) ** 2 - len(LEGAL)


def test_finished_states_have_no_way_out() -> None:
    for state in JobState:
        assert (JOB_MOVES[state] == frozenset()) == state.finished


@dataclass
class Rank:
    state: RankPhase


ORDER = [RankPhase.ASSIGNED, RankPhase.LAUNCHING, RankPhase.RUNNING, RankPhase.EXITED, RankPhase.GONE]


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(RankPhase, RankPhase)))
def test_rank_phases_only_move_forward(src: RankPhase, dst: RankPhase) -> None:
    rank = Rank(src)
    ended = {RankPhase.GONE, RankPhase.LOST}
    forward = dst not in ended and src not in ended and ORDER.index(dst) > ORDER.index(src)
    forward = forward or (dst in ended and src not in ended)
    assert advance(rank, dst) is forward
    assert rank.state is (dst if forward else src)


def test_past_exit_is_every_phase_ordered_at_exited_or_later() -> None:
    """The rank's end instant is set once its phase is in PAST_EXIT, read instead of two ``order`` look-ups."""
    assert set(PAST_EXIT) == {p for p in RankPhase if p.order >= RankPhase.EXITED.order}
    assert len(PAST_EXIT) == len(set(PAST_EXIT))


@pytest.mark.parametrize("state", list(RankState))
def test_every_agent_rank_state_has_a_phase(state: RankState) -> None:
    running = RankPhase.from_agent(state.value, None)
    exited = RankPhase.from_agent(state.value, 0)
    expected = {
        RankState.STARTING: (RankPhase.LAUNCHING, RankPhase.LAUNCHING),
        RankState.RELEASING: (RankPhase.EXITED, RankPhase.EXITED),
        RankState.GONE: (RankPhase.GONE, RankPhase.GONE),
    }.get(state, (RankPhase.RUNNING, RankPhase.EXITED))
    assert (running, exited) == expected


def test_an_unknown_agent_state_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"unknown rank state 'paused'.*starting"):
        RankPhase.from_agent("paused", None)


def test_every_end_intent_has_a_reason_and_requeued_is_not_one() -> None:
    assert set(INTENT_REASON) == set(EndIntent)
    assert "requeued" not in {r.value for r in INTENT_REASON.values()}


def test_a_state_is_worded_as_a_sentence_says_it() -> None:
    from labgang.launcher.lifecycle.states import state_phrase

    words = {state: state_phrase(state) for state in JobState}
    assert words[JobState.PENDING] == "is pending" and words[JobState.RUNNING] == "is running"
    assert words[JobState.SUCCEEDED] == "has succeeded" and words[JobState.TIMEOUT] == "timed out"
    assert words[JobState.CANCELLED] == "was cancelled" and words[JobState.FAILED] == "has failed"
    assert all(not w.startswith("is ") for s, w in words.items() if s.finished)  # never "is timeout"
