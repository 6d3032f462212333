"""``labgang plan``: how many GPUs the lab needs (docs/planning.md).

- ``plan replay [FILE]``: the store's finished jobs over ``--since/--until`` (or a file written by
  ``labgang history --export``) replayed through the coordinator's scheduler and lifecycle on a
  simulated clock, under the current or a changed config and cluster; per-queue waits,
  utilization, preemptions, borrowing and what limited each queue; ``--target`` searches the
  smallest added capacity that meets every target (:mod:`labgang.launcher.plan`).
- ``plan serve``: replicas and GPUs for an inference deployment, every step with its arithmetic.

Bad input (a history with no finished jobs, queues the config lacks, an impossible target): one
line, exit 1; nothing is written anywhere. A file input needs no coordinator.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from labgang.agent import paths, tomlfile
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.history import WhenType
from labgang.launcher.cli.history_table import TIME_HELP
from labgang.launcher.cli.plumbing import json_option, state_dir_option


@click.group("plan")
def plan() -> None:
    """How many GPUs does the lab need? Replay its own history, or size a serving deployment."""


def _load_config(path: Path) -> Any:
    from labgang.launcher.config.cluster import load_config
    from labgang.launcher.config.errors import ConfigError

    try:
        return load_config(path)
    except ConfigError as err:
        raise CommandFailed(f"--config {err.source}: {err.problems[0]}", 2) from None


def store_scenario(
    state_dir: Path | None, since: float | None, until: float | None, config_file: Path | None
) -> tuple[dict[str, Any], list[str], Any, str]:
    """The scenario of the store's finished jobs submitted in [since, until], the notes to print,
    the queue policy used (``--config``'s, else the one recorded in the store by the instance's
    coordinator when it started, else the built-in default) and that policy's name for messages.

    Raises:
        CommandFailed: the store is unreadable, or the period has no finished job (exit 1).
    """
    import os
    import time

    from labgang.launcher.api.discovery import SystemConfigInvalid, find_socket_file
    from labgang.launcher.plan.export import export_scenario
    from labgang.launcher.plan.past import HistoryUnreadable, read_history
    from labgang.launcher.plan.sources import cluster_nodes, default_policy, recorded_policy

    try:  # the store of the instance the other commands reach (the system instance first)
        state_dir = Path(os.path.dirname(find_socket_file(state_dir)))
    except SystemConfigInvalid as err:
        raise CommandFailed(str(err), 2) from None
    try:
        period = read_history(paths.db_path(state_dir), since, until)
    except HistoryUnreadable as err:
        raise CommandFailed(str(err), 1) from None
    if not period.jobs:
        raise CommandFailed(
            f"no finished jobs in the period ({period.unfinished} still pending or running, "
            f"{period.never_ran} ended without running): nothing to replay",
            1,
        )
    nodes, node_note = cluster_nodes(state_dir, period)
    notes = [node_note]
    if config_file is not None:
        config = _load_config(config_file)
        label = str(config_file)
        notes.append(f"queue policy: {config_file}")
    else:
        try:
            recorded = recorded_policy(paths.db_path(state_dir))
        except HistoryUnreadable as err:
            raise CommandFailed(str(err), 1) from None
        if recorded is not None:
            config = recorded.config
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(recorded.recorded_at))
            label = f"the recorded config ({recorded.describe()})"
            notes.append(
                f"queue policy: the config the instance runs with: {recorded.describe()} (recorded in the store "
                f"when its coordinator started, {started}); give --config for another"
            )
        else:
            config = default_policy(nodes)
            label = "the default config"
            notes.append(
                "queue policy: the built-in default (one queue 'default' with every GPU): the store records no "
                "config (its coordinator predates that record); give --config"
            )
    exported = export_scenario(period.jobs, config, nodes, name="history")
    if exported.dropped_dependencies:
        notes.append(
            f"{len(exported.dropped_dependencies)} job(s) depend on jobs outside the period: replayed without "
            "that dependency"
        )
    if period.unfinished:
        notes.append(f"{period.unfinished} job(s) of the period had not finished: not replayed")
    if period.never_ran:
        notes.append(f"{period.never_ran} job(s) of the period ended without ever holding devices: not replayed")
    if period.cancelled_pending:
        notes.append(
            f"{period.cancelled_pending} job(s) ran, were preempted or requeued, then cancelled while pending: "
            "exported with their last run's held time as duration (a scenario cannot cancel a job; the replay "
            "lets them run that long)"
        )
    return exported.data, notes, config, label


@plan.command("replay")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--since", type=WhenType(), help=f"Store input: jobs submitted from this time: {TIME_HELP}.")
@click.option("--until", type=WhenType(), help="Store input: jobs submitted up to this time (same forms).")
@click.option(
    "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
    help="Replay under this cluster.toml's queue policy instead of the recorded one.",
)  # fmt: skip
@click.option(
    "--map-queues", is_flag=True,
    help="Replay jobs of queues the config (or FILE without --config) lacks in its default queue.",
)  # fmt: skip
@click.option("--add-nodes", type=click.IntRange(0, 4096), default=0, help="Add N nodes of --node-gpus GPUs.")
@click.option("--node-gpus", type=click.IntRange(1, 1024), help="GPUs per added node (default: the largest node's).")
@click.option("--remove-node", "remove", multiple=True, metavar="NAME", help="Take out this node (repeatable).")
@click.option("--gpus", type=click.IntRange(1, 65536), help="Replay on one box of N GPUs instead.")
@click.option(
    "--quota-to", metavar="QUEUE",
    help="The queue whose nominal gpu quota grows by the added GPUs (default: 'default', else the first queue; "
    "'none': no quota grows).",
)  # fmt: skip
@click.option("--target", "targets", multiple=True, metavar="TARGET", help="[QUEUE:]p90-wait<=1h (repeatable): "
              "search the smallest added capacity that meets every target.")  # fmt: skip
@click.option("--max-add-nodes", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Most nodes the --target search adds.")  # fmt: skip
@json_option("Print the figures as JSON (per queue wait_p50_s, wait_p90_s, ...).")
@state_dir_option
def replay_cmd(
    file: Path | None,
    since: float | None,
    until: float | None,
    config_file: Path | None,
    map_queues: bool,
    add_nodes: int,
    node_gpus: int | None,
    remove: tuple[str, ...],
    gpus: int | None,
    quota_to: str | None,
    targets: tuple[str, ...],
    max_add_nodes: int,
    as_json: bool,
    state_dir: Path | None,
) -> None:
    """Replay a period's jobs through the real scheduler on a simulated clock and report per-queue
    waits (p50/p90/max), GPU utilization, preemptions, borrowing and what limited each queue.

    FILE is a scenario written by `labgang history --export`; without it, the store's finished jobs
    submitted between --since and --until (read-only; no coordinator needed for a file).
    """
    from labgang.launcher.plan.replay import (
        ClusterChange,
        PlanRefused,
        history_queues,
        replay,
        with_cluster,
        with_config,
        with_file_queues,
    )
    from labgang.launcher.plan.report import limits_report, replay_table
    from labgang.launcher.plan.target import parse_target, quota_bound, search, unmet_because

    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since must not be later than --until", param_hint="--since")
    notes: list[str] = []
    if file is not None:
        if since is not None or until is not None:
            raise click.UsageError("--since/--until select jobs in the store; a FILE holds its own period")
        try:
            data = tomlfile.read_toml(file)
        except tomlfile.TomlFileError as exc:
            raise CommandFailed(f"{exc.path}: {exc.reason}", 2) from None
        source = str(file)
        if not data.get("jobs"):
            raise CommandFailed(f"{source}: no finished jobs to replay", 1)
        if config_file is not None:
            config = _load_config(config_file)
            try:
                data = with_config(data, config, map_queues=map_queues, source=str(config_file))
            except PlanRefused as err:
                raise CommandFailed(str(err), 1) from None
        else:
            try:
                data = with_file_queues(data, map_queues=map_queues, source=source)
            except PlanRefused as err:
                raise CommandFailed(str(err), 1) from None
    else:
        data, notes, config, label = store_scenario(state_dir, since, until, config_file)
        source = "the store"
        try:
            data = with_config(data, config, map_queues=map_queues, source=label)
        except PlanRefused as err:
            raise CommandFailed(str(err), 1) from None
    queue_names = [q["name"] for q in data.get("queues", [])]
    if quota_to is None:
        quota_to = "default" if "default" in queue_names else (queue_names[0] if queue_names else None)
    elif quota_to == "none":
        quota_to = None
    elif quota_to not in queue_names:
        raise click.BadParameter(
            f"no queue {quota_to!r}; allowed: {', '.join(queue_names)}, none", param_hint="--quota-to"
        )
    parsed = []
    for text in targets:
        try:
            parsed.append(parse_target(text, history_queues(data)))
        except ValueError as err:
            raise click.BadParameter(str(err).removeprefix("--target: "), param_hint="--target") from None
    change = ClusterChange(add_nodes, node_gpus, remove, gpus, quota_to)

    replayed: dict[int, Any] = {}

    def run(extra: int) -> Any:
        if extra not in replayed:
            try:
                replayed[extra] = replay(
                    with_cluster(data, replace(change, add_nodes=change.add_nodes + extra)), source
                )
            except PlanRefused as err:
                raise CommandFailed(str(err), 1) from None
        return replayed[extra]

    for note in notes:
        click.echo(f"labgang plan replay: note: {note}", err=True)
    found = None
    if parsed:
        bound = [why for t in parsed if (why := quota_bound(t, run(0), data.get("queues", []), quota_to))]
        if bound:  # capacity cannot help: say so at once rather than search
            raise CommandFailed("; ".join(bound), 1)
        found = search(parsed, run, max_add_nodes)
        result = found.result
    else:
        result = run(0)
    per_node = node_gpus or max((n["gpus"] for n in data["nodes"]), default=8) if gpus is None else (node_gpus or gpus)
    if as_json:
        doc = result.to_dict()
        if found is not None:
            doc["target"] = {
                "targets": [t.text for t in parsed],
                "met": found.added is not None,
                "added_nodes": found.added if found.added is not None else None,
                "added_gpus": None if found.added is None else found.added * per_node,
                "best_added_nodes": found.best_added,
                "tried": {str(k): v for k, v in found.tried.items()},
                "figures": [t.shown(result) for t in parsed],
                "unmet_because": [why for t in parsed if (why := unmet_because(t, result))],
            }
        click.echo(json.dumps(doc, indent=2))
        if found is not None and found.added is None:
            sys.exit(1)
        return
    if found is not None:
        if found.added is None:
            largest = max(found.tried)
            because = [why for t in parsed if (why := unmet_because(t, result))]
            raise CommandFailed(
                f"no capacity tried meets every target: the largest tried, +{largest} node(s) of {per_node} GPUs, "
                f"and the best reached, at +{found.best_added}: {'; '.join(t.shown(result) for t in parsed)}"
                + "".join(f"; {why}" for why in because),
                1,
            )
        click.echo(
            f"smallest added capacity meeting every target: +{found.added} node(s) of {per_node} GPUs = "
            f"+{found.added * per_node} GPUs"
            + (f" (nominal gpu quota of {quota_to!r} raised by as much)" if quota_to and found.added else "")
        )
        for t in parsed:
            click.echo(f"  {t.shown(result)}")
        click.echo("")
    click.echo(replay_table(result))
    click.echo("")
    click.echo(limits_report(result))


@plan.command("serve")
@click.option("--rate", type=float, required=True, help="λ: requests per second.")
@click.option("--input-tokens", type=int, required=True, help="Input (prompt) tokens per request.")
@click.option("--output-tokens", type=int, required=True, help="Output tokens per request.")
@click.option("--replica-throughput", type=float, required=True,
              help="One replica's measured decode throughput, tok/s summed over its concurrent requests.")  # fmt: skip
@click.option("--replica-concurrency", type=int, required=True,
              help="C: the concurrent requests the throughput was measured at (and one replica serves).")  # fmt: skip
@click.option("--kv-tokens", type=int, required=True, help="One replica's KV-cache capacity, tokens.")
@click.option("--headroom", type=float, default=0.3, show_default=True, help="Fraction added to the need.")
@click.option("--spares", type=int, default=1, show_default=True, help="Spare replicas (N+k).")
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel size: GPUs per replica.")
@click.option("--node-gpus", type=int, help="GPUs per node: also answer in whole nodes.")
@json_option("Print the plan as JSON (replicas, gpus, every step's figure).")
def serve_cmd(
    rate: float,
    input_tokens: int,
    output_tokens: int,
    replica_throughput: float,
    replica_concurrency: int,
    kv_tokens: int,
    headroom: float,
    spares: int,
    tp: int,
    node_gpus: int | None,
    as_json: bool,
) -> None:
    """Size an inference deployment: replicas by throughput, by concurrency (Little's law) and by
    KV cache; the largest times (1 + headroom), rounded up, plus spares; GPUs = replicas x TP."""
    from labgang.launcher.plan.serve import CannotServe, ServeInputs, plan_serve

    inputs = ServeInputs(
        rate, input_tokens, output_tokens, replica_throughput, replica_concurrency, kv_tokens,
        headroom, spares, tp, node_gpus,
    )  # fmt: skip
    try:
        result = plan_serve(inputs)
    except CannotServe as err:
        raise CommandFailed(str(err), 1) from None
    except ValueError as err:  # a value out of range, named with what is allowed
        raise CommandFailed(str(err), 2) from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    for line in result.steps:
        click.echo(line)
    answer = f"answer: {result.replicas} replicas, {result.gpus} GPUs"
    if result.nodes is not None:
        answer += f", {result.nodes} node{'s' if result.nodes != 1 else ''} of {node_gpus} GPUs"
    click.echo(answer)
