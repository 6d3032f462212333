"""Verdicts shared across the users its placements did not read: a share's failure, or failed victim
search, answers the same share of every other user of its queue unless it met that user's own
shared cards with room for it (``ShareBook.readers``). Checked two ways: against the cycle with
the memos per user only, over random backlogs where many users hold partly used cards of their
own (so a verdict names some users and answers the rest), and on the share book itself: a user
a placement did not name gets the same placement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.shares import ShareBook
from labgang.launcher.scheduler.snapshot import Placement, RankPlacement, RunningJob, Snapshot
from share_backlogs import NODES, SHARING, USERS, backlog, queues


@pytest.mark.parametrize("seed", range(200))
def test_a_verdict_shared_with_the_users_it_did_not_read_changes_no_decision(seed: int, monkeypatch) -> None:
    snap = backlog(seed)
    shared = run_cycle(snap)
    monkeypatch.setattr(cycle_module._Cycle, "share_verdicts_across_users", False)
    assert run_cycle(snap) == shared


def test_a_verdict_that_named_some_users_answers_the_others(monkeypatch) -> None:
    """Used at all: over the same backlogs some share is answered by another user's failed search,
    or failure, that named users (met their own cards with room) other than the one it answers."""
    answered = 0
    failed, known = cycle_module._Cycle._search_failed, cycle_module._Cycle._known_failure

    def counting_search(self, e, key, stamp, user=None):
        nonlocal answered
        got = failed(self, e, key, stamp, user)
        entries = self._search_fails[key][1] if got else []
        answered += got and user is not None and all(named for *_, named, _ in entries)
        return got

    def counting_failure(self, e):
        nonlocal answered
        own = self._fail_memo.get(e.cls)
        other = self._fail_memo.get(cycle_module._any_user_cls(e)) if e.job.request.shared else None
        got = known(self, e)
        answered += got and (own is None or own[0] != self.version) and other is not None and bool(other[4])
        return got

    monkeypatch.setattr(cycle_module._Cycle, "_search_failed", counting_search)
    monkeypatch.setattr(cycle_module._Cycle, "_known_failure", counting_failure)
    for seed in range(60):
        run_cycle(backlog(seed))
    assert answered > 0


# --- the share book: a placement answers alike every user it did not name ----------------------

SPECS = queues()[:4]


@st.composite
def share_books(draw: st.DrawFn) -> tuple[list[RunningJob], str, str, JobRequest]:
    """Running shares on a few cards (a card holds one kind, sharers its trust rule lets in), and a
    share request by a user of a queue."""
    cards = draw(st.integers(1, 12))
    devices = [d.uuid for n in NODES for d in n.devices]
    running: list[RunningJob] = []
    for c in range(cards):
        uuid = devices[c]
        node = uuid.split("-")[1]
        mps = draw(st.booleans())
        spec = draw(st.sampled_from(SPECS))
        user = draw(st.sampled_from(USERS[:4]))
        room = 100
        for k in range(draw(st.integers(1, 3))):
            want = draw(st.sampled_from([25, 50])) if mps else 25 * draw(st.integers(1, 3))
            if want > room:
                break
            room -= want
            req = JobRequest(mps=want) if mps else JobRequest(shards=want // 25)
            placement: Placement = (RankPlacement(0, node, (uuid,)),)
            running.append(RunningJob(f"r{c}.{k}", spec.name, req, 0, 0.0, 0.0, placement, user=user))
    spec = draw(st.sampled_from(SPECS))
    mps = draw(st.booleans())
    req = JobRequest(mps=draw(st.sampled_from([25, 50]))) if mps else JobRequest(shards=draw(st.integers(1, 3)))
    return running, spec.name, draw(st.sampled_from(USERS[:4])), req


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(share_books())
def test_a_placement_answers_every_user_it_did_not_name_alike(case) -> None:
    running, queue, user, req = case
    snap = Snapshot(0.0, NODES, SPECS, tuple(running), (), gpu_sharing=SHARING)
    book = ShareBook(SHARING, SPECS, running)
    book.attach(DeviceBook(snap))
    mark = book.mark(fresh=True)
    got = book.place(req, queue, user)
    readers = book.readers(mark)
    if readers is None:
        return  # it joined a card, or met one that trusts the queue whatever the user: names everyone
    for other in USERS:
        if other not in readers:
            assert book.place(req, queue, other) == got, other
