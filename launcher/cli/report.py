"""``labgang report``: GPU-hours allocated and used per user, queue or team over a period (Slurm's ``sreport``).

The numbers come from the coordinator's attempt records (``GET /v1/report``,
:mod:`labgang.launcher.accounting`): every start attempt counts, preempted, requeued, cancelled
and timed-out ones included, so the report, ``labgang history`` and the
``labgang_gpu_seconds_total`` counters agree. When no coordinator answers, they are read from its
store file, read-only, as ``history`` reads it (:mod:`labgang.launcher.cli.history_store`).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from labgang.launcher.accounting import REPORT_GROUPS
from labgang.launcher.api.client import Client, CoordinatorUnavailable
from labgang.launcher.cli.format import to_json
from labgang.launcher.cli.history import WhenType
from labgang.launcher.cli.history_table import TIME_HELP
from labgang.launcher.cli.plumbing import state_dir_option, talks_to_coordinator
from labgang.launcher.text import render_table

CSV_COLUMNS = ("gpu_hours", "used_gpu_hours", "measured_gpu_hours", "activity_pct", "used_pct", "jobs", "attempts")
"""The columns of ``--csv`` after the group's own (user, queue or team)."""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t is not None else "-"


def report_table(body: Mapping[str, Any]) -> str:
    """The report as a table: one line per group value (largest allocation first), then the total,
    under a line naming the window."""
    group = str(body["group"])
    headers = (group.upper(), "GPU-H", "USED-H", "ACT%", "USED%", "JOBS", "ATTEMPTS")
    rows = [*body["rows"], body["total"]]
    lines = [
        (
            str(r[group]),
            f"{r['gpu_hours']:.2f}",
            f"{r['used_gpu_hours']:.2f}",
            _pct(r.get("activity_pct")),
            _pct(r.get("used_pct")),
            r["jobs"],
            r["attempts"],
        )
        for r in rows
    ]
    return f"GPU-hours per {group}, {report_window(body)}\n" + render_table(headers, lines)


def report_window(body: Mapping[str, Any]) -> str:
    """The heading's period: ``2026-12-01 00:00 .. now``; without ``--since``, ``all time`` and,
    when any attempt counted, the first one's admission (``all time (first record 2026-12-01
    16:20) .. now``)."""
    until = body.get("until")
    end = _when(until) if until is not None else "now"
    since = body.get("since")
    if since is not None:
        return f"{_when(since)} .. {end}"
    first = body.get("first_admit_time")
    start = "all time" if first is None else f"all time (first record {_when(first)})"
    return f"{start} .. {end}"


def report_csv(body: Mapping[str, Any]) -> str:
    """The report as CSV: a header line, one line per group value, then the ``total`` line."""
    group = str(body["group"])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((group, *CSV_COLUMNS))
    rows: Sequence[Mapping[str, Any]] = [*body["rows"], body["total"]]
    for r in rows:
        writer.writerow((r[group], *("" if r.get(c) is None else r[c] for c in CSV_COLUMNS)))
    return out.getvalue().rstrip("\n")


@click.command()
@click.option(
    "--by",
    "group",
    type=click.Choice(REPORT_GROUPS),
    default="user",
    show_default=True,
    help="Group by user, queue or team (a team is the queue's cohort; a queue in no cohort is its own team).",
)
@click.option("--since", type=WhenType(), help=f"Start of the period: {TIME_HELP}. Default: the first record.")
@click.option("--until", type=WhenType(), help="End of the period (same forms as --since). Default: now.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (rows, total, the window).")
@click.option("--csv", "as_csv", is_flag=True, help="Print the report as CSV (one header line, then the rows).")
@state_dir_option
@talks_to_coordinator
def report(
    state_dir: Path | None, group: str, since: float | None, until: float | None, as_json: bool, as_csv: bool
) -> None:
    """GPU-hours allocated and used per user, queue or team over a period (like sreport).

    GPU-H is allocated time: devices x the time a job's attempt held them (from its admission
    until its ranks were all gone), every attempt counted: preempted, requeued, cancelled and
    timed-out ones too. USED-H weighs that time by how busy the devices were (SM activity, or
    utilization.gpu where GPM is unsupported, sampled about every 2 s); ACT% is the mean
    activity over the sampled time, USED% is USED-H over GPU-H (the allocation ratio). An
    attempt partly inside the period counts the part inside.
    """
    if as_json and as_csv:
        raise click.UsageError("--json and --csv: choose one")
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since must not be later than --until", param_hint="--since")
    try:
        with Client.for_state_dir(state_dir) as client:
            body = client.report(by=group, since=since, until=until)
    except CoordinatorUnavailable as err:  # as sreport reads slurmdbd without slurmctld
        from labgang.launcher.cli.history_store import read_store_instead, store_report

        body = read_store_instead(
            "report", state_dir, err, lambda path: store_report(path, group=group, since=since, until=until)
        )
    if as_json:
        click.echo(to_json(body))
    elif as_csv:
        click.echo(report_csv(body))
    else:
        click.echo(report_table(body))
