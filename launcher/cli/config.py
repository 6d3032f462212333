"""``labgang config check FILE``: validate a cluster or agent configuration without starting anything."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from labgang.agent.config import AgentConfig, AgentConfigError, parse_agent_config
from labgang.agent.token import TokenError, read_token
from labgang.launcher.accounts import unknown_accounts
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, parse_config, read_toml
from labgang.launcher.config.errors import CLUSTER_EXAMPLE, missing_file_problem

KINDS = ("auto", "cluster", "agent", "machine")
"""Values of ``--kind``."""


def detect_kind(data: dict[str, Any]) -> str | None:
    """Tell ``cluster.toml`` from ``agent.toml`` by their top-level keys.

    Keys only one schema has decide (``queues``, ``cohorts``, ``default_queue`` … for a
    cluster; ``coordinator``, ``interval_s``, ``[supervisor]`` … for an agent); a key
    both have (``token_file``) or an unknown key does not count.

    Args:
        data: the parsed TOML document.

    Returns:
        ``"machine"`` for a simulated machine file (only ``[machine]`` and ``[[gpu]]``);
        else ``"cluster"`` or ``"agent"``, whichever has more of its own keys; None on a tie
        (an empty file, only shared or unknown keys).
    """
    cluster_only = set(ClusterConfig.model_fields) - set(AgentConfig.model_fields)
    agent_only = set(AgentConfig.model_fields) - set(ClusterConfig.model_fields)
    keys = set(data)
    if keys and keys <= {"machine", "gpu"}:
        return "machine"
    c, a = len(keys & cluster_only), len(keys & agent_only)
    if c == a:
        return None
    return "cluster" if c > a else "agent"


def token_warnings(files: dict[str, str | None], *, created: bool) -> list[str]:
    """What would stop the daemon that reads each token file, found now rather than at its start.

    Args:
        files: config key (``token_file``, ``read_token_file``) -> the path it names, or None.
        created: the daemon creates a missing file (the coordinator) rather than refusing it
            (the agent).

    Returns:
        One phrase per file readable by group or others, not a token, or missing where it is not
        created (:func:`labgang.agent.token.read_token`'s refusals), each naming the key. A file
        this user may not read says nothing: the daemon may run as another user (root's 0600 token
        checked by a lab member).
    """
    out = []
    for key, path in files.items():
        if path is None or (created and not Path(path).exists()):
            continue
        try:
            read_token(path, by_coordinator=True)
        except TokenError as exc:
            if exc.problem.startswith("cannot be read") and not os.access(path, os.R_OK):
                continue
            out.append(f"{key}: {exc.path} {exc.problem}: the daemon reading it would refuse to start")
    return out


def _invalid(file: str, problems: list[str]) -> None:
    for problem in problems:  # one line per problem, each naming the file and the key
        click.echo(f"{file}: {problem}", err=True)
    raise SystemExit(2)


@click.group("config")
def config() -> None:
    """Check configuration files."""


@config.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default="auto",
    show_default=True,
    help="cluster.toml (coordinator), agent.toml (node agent) or a simulated machine file (config/sim/*.toml); "
    "auto tells them apart by their keys.",
)
@click.option(
    "--machine",
    "machines",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="A node of the cluster, as a simulated machine file (config/sim/*.toml; once per node): a queue's "
    "or cohort's nominal GPU quota above the nodes' total is then a warning.",
)
def check(file: str, kind: str, machines: tuple[str, ...]) -> None:
    """Validate cluster.toml, agent.toml or a simulated machine file FILE.

    Prints which kind was checked. Every problem is reported in one pass, one line each
    naming the key path and what is allowed. Users and groups unknown on this host are
    printed as "warning:" lines but do not fail the check (they may exist only on other
    hosts), and so is a nominal quota above the cluster's devices where --machine names the
    cluster's nodes, and so is a token file the daemon would refuse (readable by group or
    others, not a token; for an agent, missing). Exit status: 0 valid (warnings included), 2 with one line per problem
    otherwise, each problem once (or one line when the file is missing, not UTF-8 TOML or
    its kind cannot be told; a missing file is worded as every command words it).
    """
    try:
        data = read_toml(file)
    except ConfigError as exc:
        if exc.missing:
            click.echo(
                f"labgang config check: FILE: {exc.source}: {missing_file_problem('FILE', CLUSTER_EXAMPLE)}", err=True
            )
        else:
            click.echo(f"{exc.source}: {exc.problems[0]}", err=True)
        raise SystemExit(2) from None
    if kind == "auto":
        detected = detect_kind(data)
        if detected is None:
            click.echo(
                f"{file}: cannot tell a cluster config from an agent config by its keys; "
                "give --kind cluster or --kind agent",
                err=True,
            )
            raise SystemExit(2)
        kind = detected
    if kind == "machine":
        from labgang.agent.nvml.machine import machine_from_toml

        try:
            machine = machine_from_toml(Path(file).read_text(encoding="utf-8"), file)
        except ValueError as exc:
            _invalid(file, [str(exc).removeprefix(f"{file}: ")])
        click.echo(f"{file}: machine file ok (host {machine.hostname}, {len(machine.gpus)} GPU(s))")
        return
    if kind == "agent":
        try:
            agent = parse_agent_config(data, file)
        except AgentConfigError as exc:
            _invalid(file, exc.problems)
        click.echo(f"{file}: agent config ok (node {agent.node}, coordinator {agent.coordinator})")
        for warning in token_warnings({"token_file": agent.token_file}, created=False):
            click.echo(f"{file}: warning: {warning}", err=True)
        return
    try:
        cfg = parse_config(data, file)
    except ConfigError as exc:
        _invalid(file, exc.problems)
    totals = machine_devices(machines) if machines else None  # a bad --machine fails before "ok"
    queues = ", ".join(q.name for q in cfg.queues)
    click.echo(f"{file}: cluster config ok ({len(cfg.queues)} queue(s): {queues}; default queue {cfg.default_queue})")
    for warning in unknown_accounts(cfg):
        click.echo(f"{file}: warning: {warning}", err=True)
    tokens = {"token_file": cfg.token_file, "read_token_file": cfg.read_token_file}
    for warning in token_warnings(tokens, created=True):
        click.echo(f"{file}: warning: {warning}", err=True)
    if totals is not None:
        from labgang.launcher.config.quota_beyond import quota_beyond_cluster

        for warning in quota_beyond_cluster(cfg.queues, cfg.cohorts, totals, len(machines)):
            click.echo(f"{file}: warning: {warning}", err=True)


def machine_devices(machines: tuple[str, ...]) -> dict[str, int]:
    """The allocatable devices per resource of the nodes ``machines`` describe (simulated machine
    files), as their agents would report them.

    Raises:
        SystemExit: 2, a file that is not a machine file (one line naming it and the problem).
    """
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import open_backend
    from labgang.launcher.config.quota_beyond import device_totals

    devices: list[Any] = []
    for machine in machines:
        try:
            backend = open_backend(machine)
        except (ValueError, OSError) as exc:
            problem = str(exc).removeprefix(f"{machine}: ")
            click.echo(f"labgang config check: --machine: {machine}: {problem}", err=True)
            raise SystemExit(2) from None
        try:
            devices += read_inventory(backend, hostname=machine).allocatable()
        finally:
            backend.nvmlShutdown()
    return device_totals(devices)
