"""What ``labgang show`` adds to a JobView before printing it: pitfall findings and start errors.

Without click, so that the fast path of ``show`` (:mod:`labgang.launcher.cli.quick`) and the
click command (:mod:`labgang.launcher.cli.jobs`) add the same facts.
"""

from __future__ import annotations

from labgang.launcher.api.client import ApiError, Client

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The exit statuses a rank gets when its command could not be executed (as a shell gives them),
# and the line the rank's small parent then writes first in the rank's log (agent/supervisor/shim.py).
START_FAILURE_STATUSES = frozenset({126, 127})
START_FAILURE_PREFIX = b"[labgang] cannot start "


def add_pitfalls(client: Client, job: dict[str, Any]) -> None:
    """Set ``pitfalls`` on ``job``: the coordinator's current pitfall findings about it
    (``GET /v1/pitfalls?job=ID``, the same ones `labgang top` and /metrics show); left unset
    when the coordinator is too old to have them."""
    try:
        job["pitfalls"] = client.pitfalls(str(job["id"])).get("findings", [])
    except ApiError as err:
        if err.status != 404:
            raise


def add_start_errors(client: Client, job: dict[str, Any]) -> None:
    """Set ``start_error`` on each rank of ``job`` whose command could not be executed.

    Such a rank exits 127 (no such file) or 126 (not executable) and its log holds only the reason;
    ``show`` reads that first line so the user sees it without `logs`.

    Args:
        client: the coordinator client.
        job: a JobView dict; its ``ranks`` entries gain ``start_error`` (``"cannot start 'x': No such
            file or directory"``).
    """
    for rank in job.get("ranks") or []:
        if rank.get("exit_status") not in START_FAILURE_STATUSES or not isinstance(rank.get("rank"), int):
            continue
        try:
            head = client.logs(str(job["id"]), rank=rank["rank"], offset=0).data[:4096]
        except ApiError:
            continue
        if head.startswith(START_FAILURE_PREFIX):
            line = head.split(b"\n", 1)[0].removeprefix(b"[labgang] ")
            rank["start_error"] = line.decode(errors="replace")
