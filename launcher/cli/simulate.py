"""``labgang simulate FILE... [--trace | --json]``: run scheduling scenarios on a simulated clock.

Exit status: 0 when every ``[[expect]]`` and ``[[invariant]]`` of every file holds,
1 when one fails (each failure printed as a readable diff), 2 when a file is malformed
(the message names the key and what is allowed). A file without expectations is a plain
job mix: its per-queue wait times and utilization are printed. A job that can never start
(more than its queue or the cluster could ever give it) gets one line on stderr: in a job mix
it fails the file (``FAIL``, exit 1: the coordinator would refuse it at submission); in a file
with checks it is a ``WARNING`` (the checks decide: a job kept pending may be what they test).
A queue's or cohort's nominal quota above the scenario's nodes gets a ``WARNING`` line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

import click
from labgang.launcher.simulate import ScenarioError, format_summary, load_scenario, run_scenario
from labgang.launcher.simulate.checks import Report
from labgang.launcher.simulate.summary import count, queue_stats, utilization


@click.command("simulate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--trace", is_flag=True, help="Print the event trace as JSON lines.")
@click.option(
    "--summary",
    "force_summary",
    is_flag=True,
    help="Also print per-queue waits and utilization for files with expectations.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document: each file's result, warnings, summary.")
def simulate(files: tuple[str, ...], trace: bool, force_summary: bool, as_json: bool) -> None:
    """Run scheduling scenarios (format: docs/scenarios.md): the real scheduler and job lifecycle, simulated clock.

    A file with [[expect]] / [[invariant]] tables is checked: PASS, or FAIL with one line per
    difference. A plain job list prints per-queue wait times and utilization. A job that can
    never start is named in one line (stderr): FAIL in a plain job list (the coordinator would
    refuse it), WARNING in a checked file. A queue's or cohort's nominal quota above the
    scenario's nodes is a WARNING line.

    Exit status: 0 every check holds, 1 a check failed or a plain job list has a job that can
    never start, 2 a file is missing, not UTF-8 TOML, or malformed.
    """
    if trace and as_json:
        raise click.UsageError("--json and --trace cannot be combined (--trace already prints JSON lines)")
    status = 0
    results: list[dict[str, Any]] = []
    for path in files:
        try:
            scenario = load_scenario(path)
            tracer = None
            if trace:

                def tracer(event: dict, _path: str = path) -> None:
                    click.echo(json.dumps({"file": _path, **event}, sort_keys=False))

            report = run_scenario(scenario, tracer)
        except ScenarioError as exc:
            status = 2
            if as_json:
                results.append({"file": path, "status": "error", "problems": exc.problems})
            elif exc.unreadable:
                click.echo(f"ERROR {exc.source}: {exc.problems[0]}", err=True)
            else:
                for line in exc.problems:  # one line per problem, each naming the file and the key
                    click.echo(f"ERROR {exc.source}: {line}", err=True)
            continue
        if scenario.has_checks and not report.ok:
            status = max(status, 1)
        refused = not scenario.has_checks and bool(report.never_starts)  # a job mix with a job that never runs
        if refused:
            status = max(status, 1)
        beyond = _quota_beyond(report)
        if as_json:
            results.append(_result(path, report, force_summary or not scenario.has_checks, beyond))
            continue
        for warning in report.never_starts:
            click.echo(f"{'FAIL' if refused else 'WARNING'} {path}: {warning.line()}", err=True)
        for line in beyond:
            click.echo(f"WARNING {path}: {line}", err=True)
        name = scenario.file.scenario.name
        if scenario.has_checks:  # with --trace, stdout stays pure JSON lines
            if report.ok:
                click.echo(
                    f"PASS {path} ({name}): {count(report.checked, 'expectation')}, "
                    f"{count(len(scenario.file.invariant), 'invariant')}",
                    err=trace,
                )
            else:
                click.echo(f"FAIL {path} ({name})", err=trace)
                for line in report.failures:
                    click.echo(f"  {line}", err=trace)
        for gone in report.cancelled():  # a dependency that can never hold cancelled it
            click.echo(f"CANCELLED {path}: {gone['job']} ({gone['code']}): {gone['reason']}", err=trace)
        if force_summary or not scenario.has_checks:
            click.echo(f"{path} ({name})")
            click.echo(format_summary(report.simulation))
    if as_json:
        click.echo(json.dumps({"files": results}, indent=2))
    sys.exit(status)


def _quota_beyond(report: Report) -> list[str]:
    """The scenario's queues and cohorts whose nominal quota is above its nodes' devices."""
    from labgang.launcher.config.quota_beyond import device_totals, quota_beyond_cluster

    scenario = report.scenario
    totals = device_totals(d for node in scenario.nodes for d in node.devices)
    return quota_beyond_cluster(scenario.file.queues, scenario.file.cohorts, totals, len(scenario.nodes))


def _result(path: str, report: Report, with_summary: bool, beyond: list[str]) -> dict[str, Any]:
    """One file's ``--json`` object: status ("pass", "fail", or "summary" for a plain job mix; "fail"
    for a job mix with a job that can never start, each such job then also a line of ``failures``),
    the checks, the never-start warnings, the quota above the nodes (``quota_warnings``) and, for a
    job mix or with ``--summary``, the figures."""
    scenario, sim = report.scenario, report.simulation
    refused = [w.line() for w in report.never_starts] if not scenario.has_checks else []
    status = ("pass" if report.ok else "fail") if scenario.has_checks else ("fail" if refused else "summary")
    out: dict[str, Any] = {
        "file": path,
        "name": scenario.file.scenario.name,
        "status": status,
        "expectations": report.checked,
        "invariants": len(scenario.file.invariant),
        "failures": report.failures + refused,
        "warnings": [w.to_dict() for w in report.never_starts],
        "quota_warnings": beyond,
        "cancelled": report.cancelled(),
    }
    if with_summary:
        out["summary"] = {
            "simulated_s": sim.now,
            "jobs": len(sim.jobs),
            "cycles": sim.cycles,
            "queues": [asdict(s) for s in queue_stats(sim)],
            "utilization": utilization(sim),
        }
    return out
