"""The agent's node lease alone (``agent/lease.py``): when it runs out, what renews it."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.lease import LEASE_FILE, LEASE_SHARE, NodeLease, load_lease, save_lease


def test_an_unarmed_lease_never_runs_out() -> None:
    lease = NodeLease()
    assert (lease.expires_at, lease.renew_every, lease.due(1e9)) == (None, None, False)


def test_the_lease_runs_out_before_the_coordinators_timeout_counted_from_the_send() -> None:
    lease = NodeLease()
    lease.arm(10.0, sent_at=100.0)  # the welcome answered a hello sent at 100
    assert lease.expires_at == 100.0 + 10.0 * LEASE_SHARE < 110.0
    assert not lease.due(107.9)
    assert lease.due(108.0)
    assert lease.renew_every == 2.0


def test_only_a_newer_answered_renewal_moves_it_and_a_renewal_ends_the_fence() -> None:
    lease = NodeLease()
    lease.arm(10.0, sent_at=100.0)
    lease.confirm(104.0)
    lease.confirm(103.0)  # a late answer to an older renewal
    assert lease.expires_at == 112.0
    assert lease.due(112.0)
    lease.fenced = True  # the agent stopped its ranks
    assert not lease.due(200.0)  # once per lapse
    lease.confirm(201.0)
    assert not lease.fenced and lease.due(209.0)


def test_renewals_are_capped_for_long_timeouts() -> None:
    lease = NodeLease()
    lease.arm(300.0, sent_at=0.0)
    assert lease.renew_every == 5.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_bad_node_timeout_is_refused_naming_the_field(bad: float) -> None:
    with pytest.raises(ValueError, match="node_timeout_s"):
        NodeLease().arm(bad, sent_at=0.0)


def test_a_saved_lease_carries_over_to_the_next_agent_on_its_own_clock(tmp_path: Path) -> None:
    lease = NodeLease()
    lease.arm(10.0, sent_at=50.0)  # confirmed at monotonic 50, i.e. unix 1000 - (60 - 50) = 990
    save_lease(tmp_path, lease, mono_now=60.0, wall_now=1000.0)
    # The next agent starts 3 s later (unix 1003) on a monotonic clock that reads 5.
    restored = load_lease(tmp_path, mono_now=5.0, wall_now=1003.0)
    assert restored.node_timeout_s == 10.0
    assert restored.confirmed_at == pytest.approx(5.0 - 13.0)
    assert restored.expires_at == pytest.approx(-8.0 + 8.0)  # it ran out at once: 13 s > 0.8 x 10


@pytest.mark.parametrize(
    "content", ["", "{", '{"node_timeout_s": 0, "confirmed_at": 1}', '{"node_timeout_s": "x"}', "[]"]
)
def test_a_missing_or_bad_lease_file_leaves_the_lease_unarmed(tmp_path: Path, content: str) -> None:
    if content:
        (tmp_path / LEASE_FILE).write_text(content)
    assert load_lease(tmp_path, mono_now=1.0, wall_now=1.0).expires_at is None


def test_an_unarmed_lease_is_not_saved(tmp_path: Path) -> None:
    save_lease(tmp_path, NodeLease(), mono_now=1.0, wall_now=1.0)
    assert not (tmp_path / LEASE_FILE).exists()
