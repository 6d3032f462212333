"""A share of a card in the accounting records (a new user's finding: shares were billed as whole
GPUs): an attempt's ``share`` scales its GPU-seconds, its activity and the ``/metrics`` counters'
sums; it survives the store; a store written before shares were recorded gains the column, its
rows read back as whole devices (billed as they were), also when opened read-only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from labgang.launcher.accounting import UsageTotals
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.attempts import AttemptRecord


def shard(job_id: str = "1", share: float = 0.25) -> AttemptRecord:
    return AttemptRecord(
        job_id=job_id, attempt=0, user="alice", queue="team", pending_since=0.0, admit_time=100.0,
        nodes=("n1",), devices=("n1/GPU-a",), end_time=120.0, outcome="succeeded", share=share,
    )  # fmt: skip


def test_a_quarter_card_held_20s_is_5_gpu_seconds_and_its_activity_a_quarter_of_the_cards() -> None:
    rec = shard()
    assert rec.gpus == 0.25
    assert rec.gpu_seconds(0.0) == pytest.approx(5.0)
    assert rec.overlap(110.0, None, 0.0) == (pytest.approx(2.5), pytest.approx(0.5))
    rec.record_activity(20.0, 50.0)
    assert (rec.measured_gpu_s, rec.busy_gpu_s) == (pytest.approx(5.0), pytest.approx(2.5))
    assert rec.view(0.0)["activity_pct"] == pytest.approx(50.0)
    totals = UsageTotals({})
    totals.attempt_ended(rec)
    assert totals.ended[("team", "alice")][0] == pytest.approx(5.0)


def test_the_share_survives_the_store_and_the_counters_sum_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    try:
        store.save_attempt(shard("1", 0.25))
        store.save_attempt(shard("2", 0.5))
        store.commit()
        got = store.attempts_of(["1", "2"])
        assert [got[j][0].share for j in ("1", "2")] == [0.25, 0.5]
        assert [r.gpus for r in store.attempts_between(None, None)] == [0.25, 0.5]
        assert store.ended_gpu_seconds()[("team", "alice")][0] == pytest.approx(0.75 * 20.0)
    finally:
        store.close()


def _store_without_share(path: Path) -> None:
    """A schema 3 store as written before shares were recorded: one attempt of one shard."""
    store = Store(path)
    store.save_attempt(shard())
    store.commit()
    store.close()
    db = sqlite3.connect(path)
    db.executescript("ALTER TABLE attempts DROP COLUMN share; UPDATE attempts SET gpus = 1;")
    db.close()


def test_a_store_from_before_shares_reads_its_rows_as_whole_devices_read_only_or_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _store_without_share(path)
    ro = Store(path, read_only=True)
    try:
        [rec] = ro.attempts_between(None, None)
        assert (rec.share, rec.gpus, rec.gpu_seconds(0.0)) == (1.0, 1, pytest.approx(20.0))
    finally:
        ro.close()
    store = Store(path)
    try:
        [rec] = store.attempts_of(["1"])["1"]
        assert (rec.share, rec.gpus) == (1.0, 1)  # billed as a whole GPU then, and still
        assert store.ended_gpu_seconds()[("team", "alice")][0] == pytest.approx(20.0)
        store.save_attempt(shard("2"))
        store.commit()
        assert store.attempts_of(["2"])["2"][0].share == 0.25
    finally:
        store.close()
