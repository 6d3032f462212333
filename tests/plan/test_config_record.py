"""The config an instance runs with, recorded in a real store and read back read-only
(``launcher/config/record.py``), as ``plan replay`` without ``--config`` reads it."""

from __future__ import annotations

from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.config.record import CONFIG_KEY, read_recorded, record_config
from labgang.launcher.coordinator.store import Store
from labgang.launcher.plan.past import open_read_only
from labgang.launcher.plan.sources import recorded_policy

CONFIG = parse_config(
    {
        "default_queue": "vision",
        "queues": [
            {"name": "vision", "cohort": "lab", "nominal": {"gpu": 4}, "borrowing_limit": {"gpu": 2}},
            {"name": "nlp", "cohort": "lab", "nominal": {"gpu": 4, "mig-1g.10gb": 7}},
        ],
        "priority_classes": {"high": 100},
    }
)


def test_recorded_config_reads_back_equal(tmp_path: Path) -> None:
    db = tmp_path / "labgang.db"
    store = Store(db)
    record_config(store, CONFIG, "/etc/labgang/cluster.toml", 1_700_000_000.0)
    store.close()
    recorded = recorded_policy(db)
    assert recorded is not None
    assert recorded.config == CONFIG
    assert recorded.source == "/etc/labgang/cluster.toml" and recorded.recorded_at == 1_700_000_000.0
    assert recorded.describe() == "/etc/labgang/cluster.toml"
    # a later start overwrites it; None as the source is the built-in default
    store = Store(db)
    record_config(store, CONFIG, None, 1_700_000_100.0)
    store.close()
    again = recorded_policy(db)
    assert again is not None and again.source is None and again.recorded_at == 1_700_000_100.0
    assert "built-in default" in again.describe()


def test_no_record_or_a_broken_one_is_none(tmp_path: Path) -> None:
    db = tmp_path / "labgang.db"
    store = Store(db)
    store.close()
    assert recorded_policy(db) is None  # a store written before the record existed
    store = Store(db)
    store.save_meta(CONFIG_KEY, '{"source": null, "recorded_at": 1, "config": {"queues": "not a list"}}')
    store.commit()
    store.close()
    conn = open_read_only(db)
    try:
        assert read_recorded(conn) is None
    finally:
        conn.close()


def test_reading_a_stopped_store_leaves_no_file_beside_it(tmp_path: Path) -> None:
    # `history --export` and `plan replay --since` on a stopped instance read its store: they must
    # not leave -wal/-shm files (owned by whoever read it) in the instance's state directory.
    db = tmp_path / "labgang.db"
    store = Store(db)
    record_config(store, CONFIG, None, 1_700_000_000.0)
    store.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert before == ["labgang.db"]
    assert recorded_policy(db) is not None
    conn = open_read_only(db)
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
