"""``NodeDrains`` over a real SQLite store: drains written at once by two requests are both kept,
a restarted coordinator (a new ``NodeDrains`` on the same file) reads them, a resume ends one, and a
store value that is no drain table drains nothing (and says so in the log)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from labgang.launcher.coordinator.drains import META_KEY, NodeDrains
from labgang.launcher.coordinator.store import Store


async def test_concurrent_drains_are_all_kept_and_outlive_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    kicks: list[int] = []
    drains = NodeDrains(store, lambda: kicks.append(1))
    await asyncio.gather(*(drains.drain(f"n{i}", f"reason {i}", "root", 100.0 + i) for i in range(5)))
    assert sorted(drains.drained) == [f"n{i}" for i in range(5)] and drains.nodes == frozenset(drains.drained)
    assert len(kicks) == 5  # each change asks for a cycle
    ended = await drains.resume("n3")
    assert (ended.reason, ended.by, ended.since) == ("reason 3", "root", 103.0)
    with pytest.raises(KeyError):
        await drains.resume("n3")
    store.close()
    again = NodeDrains(Store(tmp_path / "db"), lambda: None)
    assert {n: d.reason for n, d in again.drained.items()} == {"n0": "reason 0", "n1": "reason 1",
                                                                "n2": "reason 2", "n4": "reason 4"}  # fmt: skip


def test_a_stored_value_that_is_no_drain_table_drains_nothing(tmp_path: Path, caplog) -> None:
    store = Store(tmp_path / "db")
    store.save_meta(META_KEY, '["n1"]')
    store.commit()
    with caplog.at_level(logging.ERROR, logger="labgang.drains"):
        drains = NodeDrains(store, lambda: None)
    assert drains.drained == {} and drains.nodes == frozenset()
    assert "is not a drain table" in caplog.text
