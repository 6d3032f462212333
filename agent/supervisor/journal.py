"""The supervisor's journal on disk: one folder per rank, small JSON files written atomically.

Layout under the state dir::

    ranks/<job_id>/<rank>/          root-owned (the agent's user), mode 0700
        spec.json     LaunchSpec.to_dict()                          agent, at launch
        launch.bin    resolved argv/env/credentials/log for the shim   agent, at launch (marshal: the
                      shim avoids importing json to start faster)
        shim.json     {"pid", "start_ticks"} of the small parent    agent, after spawning it
        rank.json     {"pid", "pgid", "start_ticks", "started_at"}  shim, after spawning the rank
        exit.json     {"exit_status", "ended_at", "error"}          shim, when the rank's main process ended
        state.json    {"state", "known", "kill_by", "term_sent", ...} agent, on every transition, and
                      once a stop's SIGTERM went (``term_sent``)
        shim.err      the shim's own stderr (never the rank's output)
    logs/<job_id>/                  agent-owned, mode 0711 under a root agent (others may not list it)
        rank-<rank>.log[.1]         owned by the rank's user, mode 0600
        rank-<rank>.log[.1].stderr  where the stderr bytes of that log are (shim.py RotatingLog)

Files written by the shim never change after they are written, and every write is a
``rename`` of a complete temporary file, so a reader (or an agent restarted after a crash)
sees each file either whole or not at all. The agent's ``state.json`` and ``shim.json`` writes
go through a ``writer.JournalWriter`` (in the agent: in order, on a thread of its own), which
keeps them ahead of the signals and reports that depend on them.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SPEC = "spec.json"
LAUNCH = "launch.bin"
SHIM = "shim.json"
RANK = "rank.json"
EXIT = "exit.json"
STATE = "state.json"
SHIM_ERR = "shim.err"


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temporary file + ``os.replace``)."""
    write_text(path, json.dumps(data, sort_keys=True))


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file + ``os.replace``)."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_marshal(path: Path, data: Any) -> None:
    """Write plain ``data`` (dict/list/str/int/bool/None) with ``marshal``, atomically."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as fh:
        marshal.dump(data, fh)
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    """Read a JSON file written by ``write_json``; ``None`` when it does not exist yet."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


class Journal:
    """Paths and iteration over the rank folders and logs under a state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.ranks_dir = self.state_dir / "ranks"
        self.logs_dir = self.state_dir / "logs"

    def rank_dir(self, job_id: str, rank: int) -> Path:
        """The journal folder of one rank."""
        return self.ranks_dir / job_id / str(rank)

    def log_dir(self, job_id: str) -> Path:
        """The folder holding a job's rank logs on this node."""
        return self.logs_dir / job_id

    def log_path(self, job_id: str, rank: int) -> Path:
        """The current log file of one rank (its predecessor after a rotation ends in ``.1``)."""
        return self.log_dir(job_id) / f"rank-{rank}.log"

    def iter_rank_dirs(self) -> Iterator[tuple[str, int, Path]]:
        """Yield ``(job_id, rank, folder)`` for every journalled rank, sorted."""
        if not self.ranks_dir.is_dir():
            return
        for job_dir in sorted(self.ranks_dir.iterdir()):
            if not job_dir.is_dir():
                continue
            for rank_dir in sorted(job_dir.iterdir(), key=lambda p: p.name):
                if rank_dir.name.isdigit() and (rank_dir / SPEC).is_file():
                    yield job_dir.name, int(rank_dir.name), rank_dir

    def remove_rank(self, job_id: str, rank: int) -> None:
        """Delete one rank's journal folder (and the job folder once empty). Logs are kept."""
        shutil.rmtree(self.rank_dir(job_id, rank), ignore_errors=True)
        try:
            (self.ranks_dir / job_id).rmdir()
        except OSError:
            pass
