"""The coordinator's views built from scratch, with no cache: what the cached ``GET /v1/jobs`` listing
and pitfall snapshot must equal (tests/coordinator/test_views_stay_fresh.py, test_metrics_unchanged.py)."""

from __future__ import annotations

import json
from typing import Any

from labgang.launcher.api import jsoncodec
from labgang.launcher.coordinator import views
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.pitfalls import ClusterSnapshot
from lifecycle_driver import ROOT


def built_now(coord: Coordinator, view: str) -> list[dict[str, Any]]:
    """Every job as ``GET /v1/jobs?all=1&view=VIEW`` lists it to root ("full" or "queue"), built anew."""
    jobs = coord.desk.list_jobs(ROOT, all_users=True)
    shape = views.job_view if view == "full" else views.queue_row
    return [json.loads(jsoncodec.dumps(shape(job))) for job in jobs]


def snapshot_built_now(coord: Coordinator, finished_within_s: float = 3600.0) -> ClusterSnapshot:
    """The pitfall snapshot as ``Coordinator.pitfall_snapshot`` built it before it kept the jobs'
    views: every job's JobView built and parsed anew."""
    now = coord.clock()
    jobs = [
        views.job_view(job)
        for job in coord.jobs.values()
        if not job.status.state.finished or now - (job.status.end_time or now) <= finished_within_s
    ]
    return ClusterSnapshot.from_api(now, {"nodes": coord.node_views()}, {"jobs": jobs}, {"queues": coord.queue_views()})
