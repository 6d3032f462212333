"""``GET /v1/jobs/{id}?view=text``: the ``labgang show`` text, rendered by the coordinator.

``labgang show JOB`` is a shell command; rendering its text here, where the code is loaded already,
spares a fresh interpreter the modules that lay it out, reading the JobView, and a second request for
the job's pitfall findings (docs/cli-startup.md). The text is exactly the command's own: the same
function (:func:`labgang.launcher.cli.format.job_detail`) over the same facts, the JobView as the
command would read it (its JSON, decoded), the pitfall findings ``GET /v1/pitfalls?job=ID`` answers,
and each rank's start error read from the head of its log as the command reads it
(:mod:`labgang.launcher.cli.job_facts`).

Two facts are the command's, not the coordinator's: the clock (the socket is local, so the two share
it) and the local time zone, in which ``show`` writes each rank's START and END. The command sends its
``TZ`` variable (``tz``, empty when unset); where it is not the coordinator's own, :func:`same_zone` is
False and the command gets the JobView and writes the text itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from labgang.launcher.api import jsoncodec
from labgang.launcher.cli.format import job_detail
from labgang.launcher.cli.job_facts import start_error, start_failures
from labgang.launcher.coordinator.errors import ApiError

if TYPE_CHECKING:
    from labgang.launcher.coordinator.job_operations import JobOperations
    from labgang.launcher.coordinator.pitfall_watch import PitfallWatch
    from labgang.launcher.coordinator.requests import Caller


def same_zone(tz: str) -> bool:
    """True when a command whose ``TZ`` variable is ``tz`` (``""``: unset) sees local times as this
    process does: the same variable, or neither has one (both then read the machine's zone)."""
    return tz == os.environ.get("TZ", "")


async def job_text(
    desk: JobOperations, watch: PitfallWatch | None, caller: Caller, view: dict[str, Any], now: float
) -> str:
    """What ``labgang show JOB`` prints for the job whose JobView (as ``caller`` may see it) is ``view``.

    Args:
        desk: reads the head of a rank's log (``read_log_of_attempt``, as ``GET .../logs`` does).
        watch: the pitfall watch (None: no findings, as ``GET /v1/pitfalls`` answers then).
        caller: who asks (the log reads are checked for them).
        view: the JobView; not changed.
        now: unix seconds, the coordinator's clock.

    Returns:
        The text, without a final newline (the command prints it with one).
    """
    job: dict[str, Any] = jsoncodec.loads(jsoncodec.dumps(view))  # exactly the values the command reads
    for rank in start_failures(job):
        try:
            data, _, _, _, _ = await desk.read_log_of_attempt(caller, str(job["id"]), rank["rank"], 0)
        except ApiError:  # as the command, which skips a rank whose log it cannot read
            continue
        found = start_error(data[:4096])
        if found is not None:
            rank["start_error"] = found
    findings = [] if watch is None else watch.view(str(job["id"]))["findings"]
    job["pitfalls"] = jsoncodec.loads(jsoncodec.dumps(findings))
    return job_detail(job, now)
