"""The queue policy an instance runs with, recorded in its store so that later readers of the
history (``labgang plan replay`` and ``labgang history --export`` without ``--config``) replay
under the config that really applied, not the built-in default.

The coordinator writes it once when it starts (:func:`record_config`), as one ``meta`` entry
(key :data:`CONFIG_KEY`) holding JSON: ``{"source": the cluster.toml path or null for the
built-in default, "recorded_at": unix seconds, "config": the validated config as
:meth:`ClusterConfig.model_dump` gives it}``. The whole config is kept, not only its path, so a
file edited or removed since still replays as it was. A later start overwrites it: a replay
uses the config of the instance's latest start.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from labgang.launcher.config.cluster import ClusterConfig, ConfigError, parse_config

CONFIG_KEY = "cluster_config"
"""The store's ``meta`` key of the recorded config."""


@dataclass(frozen=True)
class RecordedConfig:
    """The config a coordinator of this store last started with.

    Attributes:
        config: the queue policy (a validated :class:`ClusterConfig`).
        source: the ``cluster.toml`` it was read from; None: the built-in default for the
            machine's devices (``labgang up`` without ``--config``).
        recorded_at: unix seconds when that coordinator started.
    """

    config: ClusterConfig
    source: str | None
    recorded_at: float

    def describe(self) -> str:
        """Where it came from, for a note: ``"/etc/labgang/cluster.toml"`` or the built-in default."""
        if self.source is None:
            return "the built-in default of `labgang up` without --config"
        return self.source


def record_config(store: Any, config: ClusterConfig, source: str | None, now: float) -> None:
    """Write ``config`` (read from ``source``; None: the built-in default) into ``store``'s meta
    table, committed now.

    Args:
        store: the coordinator's :class:`labgang.launcher.coordinator.store.Store`.
        now: unix seconds.
    """
    body = {"source": source, "recorded_at": now, "config": config.model_dump(mode="json")}
    store.save_meta(CONFIG_KEY, json.dumps(body, sort_keys=True))
    store.commit()


def read_recorded(db: sqlite3.Connection) -> RecordedConfig | None:
    """The config recorded in the store open as ``db`` (read-only is enough), or None when none
    was recorded (a store written before this record existed) or the record no longer validates
    (a config key a later labgang removed).

    Raises:
        sqlite3.Error: the store cannot be read.
    """
    row = db.execute("SELECT value FROM meta WHERE key=?", (CONFIG_KEY,)).fetchone()
    return None if row is None else parse_recorded(row[0])


def parse_recorded(text: str) -> RecordedConfig | None:
    """The recorded config from the ``meta`` value ``text`` (:data:`CONFIG_KEY`'s), or None when it
    no longer validates (a config key a later labgang removed)."""
    try:
        body = json.loads(text)
        config = parse_config(body["config"], source="the recorded config")
        return RecordedConfig(config, body.get("source"), float(body["recorded_at"]))
    except (ValueError, KeyError, TypeError, ConfigError):
        return None
