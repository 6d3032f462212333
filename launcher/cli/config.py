"""``labgang config check FILE``: validate a cluster configuration without starting anything."""

from __future__ import annotations

import click

from labgang.launcher.config import ConfigError, load_config


@click.group("config")
def config() -> None:
    """Check configuration files."""


@config.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def check(file: str) -> None:
    """Validate cluster.toml FILE: exit 0 when valid, 2 with one line per problem otherwise."""
    try:
        cfg = load_config(file)
    except ConfigError as exc:
        if exc.unreadable:  # not UTF-8, not TOML, unreadable: one line
            click.echo(f"{exc.source}: {exc.problems[0]}", err=True)
            raise SystemExit(2) from None
        click.echo(f"{exc.source}: invalid configuration", err=True)
        for problem in exc.problems:
            click.echo(f"  {problem}", err=True)
        raise SystemExit(2) from None
    queues = ", ".join(q.name for q in cfg.queues)
    click.echo(f"{file}: ok ({len(cfg.queues)} queue(s): {queues}; default queue {cfg.default_queue})")
