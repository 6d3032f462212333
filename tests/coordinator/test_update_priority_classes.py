"""``labgang update -p`` with an unknown priority class lists only the classes the user may use in
the job's queue (as ``submit`` and ``explain`` do); an admin is told every class. Nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import verbs
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import BadRequest, NotFound
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from lifecycle_driver import ROOT, Clock

ALICE = Caller(uid=1000, user="alice")


async def update(coord: Coordinator, caller: Caller, job_id: str, body: object) -> None:
    await verbs.update(
        coord.desk,
        caller,
        job_id,
        body,
        config=coord.config,
        store=coord.store,
        active=coord.model.jobs,
        recent=coord.recent,
    )


async def test_an_unknown_class_lists_what_this_user_may_use_in_the_jobs_queue(tmp_path: Path) -> None:
    config = parse_config(
        {
            "priority_classes": {"low": -10, "normal": 0, "high": 100, "serving": 1000},
            "queues": [
                {"name": "default", "nominal": {"gpu": 8}, "priority_classes": ["low", "normal"]},
                {"name": "prod", "nominal": {"gpu": 8}, "priority_classes": ["serving"]},
            ],
        }
    )
    coord = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    try:
        job_id = (await coord.desk.submit(ALICE, {"argv": ["train"], "priority": "normal"})).id
        with pytest.raises(BadRequest) as refused:
            await update(coord, ALICE, job_id, {"priority": "hihg"})
        message = str(refused.value.message)
        assert message.startswith("priority: unknown priority class 'hihg' in queue default; allowed: "), message
        assert "low" in message and "normal" in message
        assert "high" not in message and "serving" not in message, message  # not this user's in this queue
        assert refused.value.allowed == ["low", "normal"]
        assert coord.jobs[job_id].spec.priority == 0 and [h.event for h in coord.jobs[job_id].history] == ["submitted"]
        with pytest.raises(BadRequest) as as_admin:
            await update(coord, ROOT, job_id, {"priority": "hihg"})
        assert as_admin.value.allowed == ["high", "low", "normal", "serving"]  # an admin may use any class
        with pytest.raises(NotFound):  # no such job: after the value, its own refusal
            await update(coord, ALICE, "999", {"priority": 5})
        with pytest.raises(BadRequest, match="unknown priority class 'hihg'"):
            await update(coord, ALICE, "999", {"priority": "hihg"})
    finally:
        coord.store.close()
