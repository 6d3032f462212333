"""``labgang drain NODE... --reason TEXT`` and ``labgang resume NODE...``: an admin takes nodes out of
scheduling for maintenance and gives them back, as Slurm's ``scontrol update NodeName=X
State=DRAIN Reason=...`` and ``State=RESUME`` (coordinator/drains.py).

NODE is a node name or a Slurm host list (``gpu[01-04,07]``, launcher/cli/hostlist.py). Each node is
acted on or refused on its own, as ``_each`` does for jobs: a refusal is one stderr
line naming the node, and the exit status is the worst one (1 a refusal, 2 a bad value).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.hostlist import HostlistError, expand
from labgang.launcher.cli.outcomes import Outcomes
from labgang.launcher.cli.plumbing import describe_api_error, json_option, state_dir_option


def _each_node(
    verb: str,
    nodes: tuple[str, ...],
    state_dir: Path | None,
    as_json: bool,
    act: Callable[[Client, str], dict[str, Any]],
    line: Callable[[dict[str, Any]], str],
) -> None:
    out = Outcomes(verb, as_json)
    named: dict[str, None] = {}
    for text in nodes:
        try:
            named.update(dict.fromkeys(expand(text)))
        except HostlistError as err:
            allowed = "node names or Slurm host lists such as gpu[01-04,07]"
            text = f"NODE: {err}" if "allowed:" in str(err) else f"NODE: {err}; allowed: {allowed}"
            raise CommandFailed(text, 2, field="NODE", allowed=allowed) from err
    with Client.for_state_dir(state_dir) as client:
        for node in named:
            try:
                answer = act(client, node)
            except ApiError as err:
                failure = describe_api_error(err)
                text = failure.message if node in failure.message else f"node {node}: {failure.message}"
                out.refused(text, failure.exit_code, failure.field, failure.allowed)
                continue
            except CoordinatorUnavailable as err:
                raise CommandFailed(str(err), 1) from err
            out.done(answer, line(answer))
    out.finish()


@click.command()
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
@click.option(
    "--reason",
    "-r",
    required=True,
    help="Why (shown by `labgang nodes`; 1-256 printable characters), as Slurm's Reason=.",
)
@json_option("Print each node's answer ({node, drain: {reason, by, since}}) as a JSON list.")
@state_dir_option
def drain(state_dir: Path | None, as_json: bool, reason: str, nodes: tuple[str, ...]) -> None:
    """Take nodes out of scheduling (admins), as scontrol update State=DRAIN.

    NODE is a node name or a Slurm host list: `labgang drain gpu[01-04] -r "PSU swap"`.

    No new job is placed on a drained node; the jobs running there run to their end (`labgang
    nodes` shows it as drng, then drain once they are gone). The drain survives a restart of the
    coordinator and of the node's agent, until `labgang resume NODE`. Draining a drained node
    again replaces its reason.
    """
    _each_node(
        "drain",
        nodes,
        state_dir,
        as_json,
        lambda client, node: client.drain(node, reason),
        lambda a: f"node {a['node']}: drained ({a['drain']['reason']})",
    )


@click.command()
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
@json_option("Print each node's answer ({node, drain: null, ended: {reason, by, since}}) as a JSON list.")
@state_dir_option
def resume(state_dir: Path | None, as_json: bool, nodes: tuple[str, ...]) -> None:
    """Give drained nodes back to scheduling (admins), as scontrol update State=RESUME.

    NODE is a node name or a Slurm host list (gpu[01-04]), as for `labgang drain`.
    """
    _each_node(
        "resume",
        nodes,
        state_dir,
        as_json,
        lambda client, node: client.resume(node),
        lambda a: f"node {a['node']}: resumed (was drained by {a['ended']['by']}: {a['ended']['reason']})",
    )
