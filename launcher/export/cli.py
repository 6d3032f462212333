"""``labgang export kueue|slurm``: write the cluster's queue policy for Kueue or Slurm.

Reads the cluster config (``--config``, default ``/etc/labgang/cluster.toml``) and the
inventory: ``--inventory FILE`` (repeatable) or, without it, the coordinator when one
answers (``--offline`` skips it). Writes the files into ``-o DIR`` (default: print to
stdout). ``--check`` writes nothing and prints only what would not translate, one line
each (``--json``: a list of ``{field, lost, nearest}``).

Exit statuses: 0 exported (or checked); 2 usage error, an unreadable or invalid config,
or a config that cannot be exported at all (the message names the field).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, load_config
from labgang.launcher.export.common import Export, ExportError, Inventory

DEFAULT_CONFIG = "/etc/labgang/cluster.toml"


def _fail(target: str, message: str) -> NoReturn:
    click.echo(f"labgang export {target}: {message}", err=True)
    sys.exit(2)


def _load(target: str, config_file: str) -> ClusterConfig:
    try:
        return load_config(config_file)
    except ConfigError as exc:  # one line, every problem, as `labgang up` and `labgang coordinator` say it
        source = f"{exc.source} (the default)" if exc.missing and config_file == DEFAULT_CONFIG else exc.source
        _fail(target, f"--config: {source}: {'; '.join(exc.problems)}")


def _inventory(target: str, files: tuple[Path, ...], offline: bool, state_dir: Path | None) -> Inventory:
    from labgang.launcher.export import inventory

    if files:
        return inventory.from_files(list(files))
    if offline:
        return Inventory(source="none (--offline)")
    inv, reason = inventory.from_coordinator(state_dir)
    if reason is not None:
        return Inventory(source="none (coordinator not reachable)")
    return inv


def _emit(target: str, result: Export, out_dir: Path | None, check: bool, as_json: bool) -> None:
    if check:
        if as_json:
            gaps = [{"field": g.field, "lost": g.lost, "nearest": g.nearest} for g in result.gaps]
            click.echo(json.dumps({"target": target, "does_not_translate": gaps}, indent=2))
        else:
            for gap in result.gaps:
                click.echo(gap.line())
        return
    if out_dir is None:
        for name, text in result.files.items():
            if len(result.files) > 1:
                click.echo(f"# ===== {name}")
            click.echo(text, nl=False)
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in result.files.items():
            path = out_dir / name
            path.write_text(text, encoding="utf-8")
            if name.endswith(".sh"):
                path.chmod(0o755)
    except OSError as exc:
        _fail(target, f"-o: cannot write into {out_dir}: {exc}")
    for name in result.files:
        click.echo(str(out_dir / name))


_common = [
    click.option(
        "--config",
        "config_file",
        default=DEFAULT_CONFIG,
        show_default=True,
        type=click.Path(dir_okay=False),
        help="cluster.toml to export.",
    ),
    click.option(
        "-o",
        "--output",
        "out_dir",
        type=click.Path(path_type=Path, file_okay=False),
        help="Write the files into this directory (default: print them).",
    ),
    click.option(
        "--inventory",
        "inventory_files",
        multiple=True,
        type=click.Path(path_type=Path, dir_okay=False),
        help="A machine file (config/sim/*.toml, nvidia-smi capture, `labgang nodes --json`); repeatable. "
        "Default: ask the coordinator.",
    ),
    click.option("--offline", is_flag=True, help="Do not ask the coordinator for the inventory."),
    click.option(
        "--state-dir",
        type=click.Path(path_type=Path, file_okay=False),
        envvar="LABGANG_STATE_DIR",
        help="Coordinator state directory (for the live inventory).",
    ),
    click.option("--check", is_flag=True, help="Write nothing; print only what would not translate."),
    click.option("--json", "as_json", is_flag=True, help="With --check: print JSON."),
]


def _with_common(f: click.decorators.FC) -> click.decorators.FC:
    for option in reversed(_common):
        f = option(f)
    return f


def _export(
    target: str,
    build: Callable[[ClusterConfig, Inventory], Export],
    config_file: str,
    out_dir: Path | None,
    inventory_files: tuple[Path, ...],
    offline: bool,
    state_dir: Path | None,
    check: bool,
    as_json: bool,
) -> None:
    """Load the config and the inventory, run ``build(config, inventory)`` and write or check
    its result; an :class:`ExportError` becomes one line and exit 2."""
    cfg = _load(target, config_file)
    try:
        inv = _inventory(target, inventory_files, offline, state_dir)
        result = build(cfg, inv)
    except ExportError as exc:
        _fail(target, f"cannot export: {exc}")
        return
    _emit(target, result, out_dir, check, as_json)


@click.group("export")
def export() -> None:
    """Export the queue policy for Kueue or Slurm (mapping: docs/export.md)."""


@export.command("kueue")
@_with_common
@click.option(
    "--namespace-per",
    type=click.Choice(["queue", "group"]),
    default="queue",
    show_default=True,
    help="LocalQueue namespaces: one per queue, or one per group named in the queue's `groups`.",
)
def kueue_cmd(
    config_file: str,
    out_dir: Path | None,
    inventory_files: tuple[Path, ...],
    offline: bool,
    state_dir: Path | None,
    check: bool,
    as_json: bool,
    namespace_per: str,
) -> None:
    """Kueue objects (kueue.x-k8s.io/v1beta2) as one YAML stream, kueue.yaml."""
    from labgang.launcher.export import kueue

    def build(cfg: ClusterConfig, inv: Inventory) -> Export:
        return kueue.export(cfg, inv, config_file, namespace_per)

    _export("kueue", build, config_file, out_dir, inventory_files, offline, state_dir, check, as_json)


@export.command("slurm")
@_with_common
@click.option(
    "--slurm-mode",
    type=click.Choice(["partitions", "qos"]),
    default="partitions",
    show_default=True,
    help="A partition per queue, or one partition and a QOS per queue.",
)
def slurm_cmd(
    config_file: str,
    out_dir: Path | None,
    inventory_files: tuple[Path, ...],
    offline: bool,
    state_dir: Path | None,
    check: bool,
    as_json: bool,
    slurm_mode: str,
) -> None:
    """slurm.conf fragment, gres.conf and sacctmgr.sh."""
    from labgang.launcher.export import slurm

    def build(cfg: ClusterConfig, inv: Inventory) -> Export:
        return slurm.export(cfg, inv, config_file, slurm_mode)

    _export("slurm", build, config_file, out_dir, inventory_files, offline, state_dir, check, as_json)


@export.command("job")
@click.option(
    "-f",
    "--file",
    "job_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="A job of groups (docs/job-groups.md: one [[group]] table per group).",
)
@click.option(
    "--to",
    "target",
    type=click.Choice(["kueue", "slurm"]),
    required=True,
    help="kueue: a JobSet admitted by Kueue as one workload; slurm: an sbatch heterogeneous job.",
)
@click.option("--name", default="job", show_default=True, help="The job's name in the target.")
@click.option("-q", "--queue", default=None, help="Kueue's LocalQueue / Slurm's partition.")
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Write the file into this directory (default: print it).",
)
@click.option("--check", is_flag=True, help="Write nothing; print only what would not translate.")
@click.option("--json", "as_json", is_flag=True, help="With --check: print JSON.")
def job_cmd(
    job_file: str, target: str, name: str, queue: str | None, out_dir: Path | None, check: bool, as_json: bool
) -> None:
    """A job of groups as a Kueue JobSet (jobset.yaml) or a Slurm hetjob (hetjob.sbatch)."""
    from labgang.launcher.cli.job_groups import groups_from_file, policies_from_file
    from labgang.launcher.cli.job_request import SubmissionError
    from labgang.launcher.export import jobset

    what = f"job --to {target}"
    try:
        groups, colocate = groups_from_file(job_file)
        build = jobset.kueue_jobset if target == "kueue" else jobset.slurm_hetjob
        result = build(groups, colocate, name, queue, policies_from_file(job_file))
    except SubmissionError as exc:
        _fail(what, str(exc))
    except ExportError as exc:
        _fail(what, f"cannot export: {exc}")
    _emit(target, result, out_dir, check, as_json)
