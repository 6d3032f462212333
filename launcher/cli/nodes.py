"""``labgang nodes``: the GPUs and MIG devices of this node (``--local``) or of the cluster.

``labgang nodes --local`` reads this machine through NVML (or ``--simulate FILE``: a
``config/sim`` machine file, an ``nvidia-smi -q``/``-q -x``/``-L`` capture or an NVML
record) and prints a table, or with ``--json`` the documented
:meth:`labgang.agent.inventory.NodeInventory.to_dict` schema. ``--record FILE`` writes
every NVML call and its answer to FILE, which ``--simulate FILE`` replays.

Without ``--local`` it asks the coordinator (``GET /v1/nodes``) and prints one line per node, as
sinfo (:mod:`labgang.launcher.cli.node_summary`); with ``--gpus`` (``--long``) each node's
inventory with who holds each device, whether its ranks are confined to their devices (the
``confined:`` line; ``--json``: ``confinement``) and any rank seen on a device it was not given
(``VIOLATION``; ``--json``: ``violations``). docs/security.md.

Exit statuses: 0 success; 1 the coordinator is not reachable or refused; 2 usage error
(bad file, no NVIDIA driver).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click
from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, Unavailable
from labgang.agent.mem_size import size_text
from labgang.agent.nvml import NvmlUnavailable, open_backend
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.format import to_json
from labgang.launcher.text import render_table

GIB = 1024**3
HEADERS = ("DEVICE", "MODEL", "UUID", "PROFILE", "MEM GiB", "UTIL%", "SM%", "TEMP", "POWER", "PROCS", "WARNINGS")


def _na(value: Any, fmt: str = "{}") -> str:
    if value is None or isinstance(value, Unavailable):
        return "n/a"
    return fmt.format(value)


def short_uuid(uuid: Any) -> str:
    """``GPU-8faa1f27-6d05-…`` → ``GPU-8faa1f27``; n/a when unknown."""
    if not isinstance(uuid, str):
        return "n/a"
    return uuid[:12]


def _memory(used: Any, total: Any) -> str:
    if isinstance(total, int) and isinstance(used, int):
        return f"{used / GIB:.1f}/{total / GIB:.1f}"
    if isinstance(total, int):
        return f"n/a/{total / GIB:.1f}"
    return "n/a"


def _procs(processes: Any) -> str:
    return "n/a" if isinstance(processes, Unavailable) else str(len(processes))


def _field_warnings(obj: Any, names: Iterable[str]) -> list[str]:
    """Fields NVML refused for a reason other than "unsupported" (permission, lost GPU, errors)."""
    out = []
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, Unavailable) and value.reason not in ("unsupported", "unknown"):
            out.append(f"{name.split('_')[0]}: {value.reason}")
    return sorted(set(out))


def gpu_row(gpu: GpuInfo, extra: str = "") -> list[str]:
    """One table row for a GPU."""
    profile = "MIG" if gpu.mig_mode_current is True else "-"
    power = "n/a"
    if not isinstance(gpu.power_w, Unavailable):
        power = f"{gpu.power_w:.0f}W" + (f"/{gpu.power_limit_w:.0f}W" if isinstance(gpu.power_limit_w, float) else "")
    warnings = list(gpu.warnings())
    if not gpu.lost:
        warnings += _field_warnings(gpu, ("memory_total_bytes", "processes", "utilization_gpu_pct", "temperature_c"))
    if extra:
        warnings.insert(0, extra)
    return [
        str(gpu.index),
        _na(gpu.name),
        short_uuid(gpu.uuid),
        profile,
        _memory(gpu.memory_used_bytes, gpu.memory_total_bytes),
        _na(gpu.utilization_gpu_pct, "{:.0f}"),
        _na(gpu.sm_active_pct, "{:.0f}"),
        _na(gpu.temperature_c, "{:.0f}C"),
        power,
        _procs(gpu.processes),
        "; ".join(warnings),
    ]


def mig_row(gpu: GpuInfo, mig: MigDeviceInfo, extra: str = "") -> list[str]:
    """One table row for a MIG device (indented under its GPU)."""
    ids = f"gi{_na(mig.gi_id)}/ci{_na(mig.ci_id)}"
    warnings = ([extra] if extra else []) + [ids] + _field_warnings(mig, ("memory_total_bytes", "processes"))
    return [
        f"  {gpu.index}:{mig.index}",
        "",
        short_uuid(mig.uuid),
        _na(mig.profile),
        _memory(mig.memory_used_bytes, mig.memory_total_bytes),
        "n/a",
        _na(mig.sm_active_pct, "{:.0f}"),
        "",
        "",
        _procs(mig.processes),
        "; ".join(warnings),
    ]


def inventory_table(inv: NodeInventory, device_notes: Mapping[str, str] | None = None) -> str:
    """The ``labgang nodes --local`` table; ``device_notes`` adds a note per device UUID (cluster mode)."""
    notes = device_notes or {}
    rows: list[list[str]] = []
    for gpu in inv.gpus:
        rows.append(gpu_row(gpu, notes.get(gpu.uuid, "") if isinstance(gpu.uuid, str) else ""))
        for mig in gpu.mig_devices:
            rows.append(mig_row(gpu, mig, notes.get(mig.uuid, "") if isinstance(mig.uuid, str) else ""))
    title = (
        f"{inv.hostname}: driver {_na(inv.driver_version)}, CUDA {_cuda(inv.cuda_driver_version)}, "
        f"{len(inv.gpus)} GPU(s), {sum(len(g.mig_devices) for g in inv.gpus)} MIG device(s)"
    )
    if not rows:
        return title + "\n(no GPUs)"
    return title + "\n" + render_table(HEADERS, rows)


def _cuda(version: Any) -> str:
    if isinstance(version, int):
        return f"{version // 1000}.{version % 1000 // 10}"
    return "n/a"


def read_local(simulate: Path | None, record: Path | None, scope: str | None = None) -> NodeInventory:
    """Read this node once (real NVML, or the simulated/recorded file), recording if asked; a
    simulated machine shows the processes of instance ``scope`` and untagged ones.

    Raises:
        NvmlUnavailable: no NVIDIA driver and no ``simulate``.
        ValueError, FileNotFoundError: a bad ``simulate`` file.
    """
    from labgang.agent.inventory import read_inventory

    backend = open_backend(simulate=simulate, record=record, scope=scope if simulate is not None else None)
    try:
        return read_inventory(backend)
    finally:
        with contextlib.suppress(Exception):  # the read already happened; a failing shutdown must not hide it
            backend.nvmlShutdown()


def confinement_line(confinement: Any) -> str:
    """The ``confined:`` line of a node in ``labgang nodes`` (``{"mode", "reason"}`` from its agent's hello)."""
    if not isinstance(confinement, Mapping):
        return "confined: unknown (the agent does not say)"
    if confinement.get("mode") == "none":
        return f"confined: NO ({confinement.get('reason')}); ranks on devices they were not given are detected via NVML"
    return f"confined: yes, {confinement.get('mode')} ({confinement.get('reason')})"


def host_limits_line(host_limits: Any) -> str:
    """The ``host limits:`` line of a node in ``labgang nodes --gpus`` (``{"enforced", "reason"}``
    from its agent's hello): whether its ranks are held to their CPUs and memory, or why not."""
    if not isinstance(host_limits, Mapping):
        return "host limits (CPUs, memory): unknown (the agent does not say)"
    if host_limits.get("enforced") is True:
        return f"host limits (CPUs, memory): enforced ({host_limits.get('reason')})"
    return f"host limits (CPUs, memory): NOT enforced ({host_limits.get('reason')}); only the scheduler counts them"


def _cluster(state_dir: Path | None, as_json: bool, topology: bool = False, per_gpu: bool = False) -> None:
    try:
        from labgang.launcher.api.client import Client, ClientError
    except ImportError:  # pragma: no cover - the client ships with labgang
        raise click.UsageError("cluster mode needs the coordinator client; use --local to read this machine") from None
    try:
        with Client.for_state_dir(state_dir) as client:
            nodes = client.nodes()
    except ClientError as exc:
        raise CommandFailed(str(exc), 1) from None
    if topology:
        from labgang.launcher.cli.topology_view import topology_dict, topology_table

        invs = [(n.get("name"), NodeInventory.from_dict(n["inventory"])) for n in nodes if n.get("inventory")]
        if as_json:
            click.echo(to_json({"nodes": [topology_dict(inv, name) for name, inv in invs]}))
        else:
            text = "\n\n".join(topology_table(inv, name) for name, inv in invs)
            click.echo(text or "no node has reported its GPUs yet")
        return
    if as_json:  # each NodeView with the STATE word the table shows (sinfo's), computed here as there
        from labgang.launcher.cli.node_summary import node_state

        click.echo(to_json({"nodes": [{**n, "state": node_state(n)} for n in nodes]}))
        return
    if not per_gpu:
        from labgang.launcher.cli.node_summary import node_summary

        click.echo(node_summary(nodes) if nodes else "no nodes have joined the coordinator")
        return
    blocks = []
    for node in nodes:
        state = "connected" if node.get("connected") else "disconnected"
        notes = {}
        for dev in node.get("devices", []):
            holder = dev.get("job") and f"{dev.get('state')} {dev.get('job')} ({dev.get('user')}, {dev.get('queue')})"
            notes[dev.get("uuid")] = holder or str(dev.get("state", ""))
        for v in node.get("violations") or []:
            notes[v.get("device")] = violation_note(v)
        inventory = node.get("inventory")
        if not inventory:
            blocks.append(f"{node.get('name')} ({state}): no inventory yet")
            continue
        table = inventory_table(NodeInventory.from_dict(inventory), notes)
        from labgang.launcher.cli.node_sharing import node_sharing_lines

        lines = [confinement_line(node.get("confinement")), host_limits_line(node.get("host_limits"))]
        lines += node_sharing_lines(node)
        blocks.append(f"[{state}] " + table + "\n" + "\n".join(lines))
    click.echo("\n\n".join(blocks) if blocks else "no nodes have joined the coordinator")


def violation_note(v: Mapping[str, Any]) -> str:
    """The WARNINGS note of a device with a violation (an item of ``GET /v1/nodes``' ``violations``):
    ``OVER BUDGET: job 7 rank 0 pid 6944 uses 512 MiB of its 16 MiB budget`` for a sharing rank over
    its ``--gpu-mem`` (``kind = "gpu-mem"``; sizes as :func:`~labgang.agent.mem_size.size_text`),
    ``VIOLATION: job … not given it`` for a rank's process on a device it was not given."""
    who = f"job {v.get('job')} rank {v.get('rank')} pid {v.get('pid')}"
    if v.get("kind") == "gpu-mem":
        used, budget = size_text(v.get("used") or 0), size_text(v.get("budget") or 0)
        return f"OVER BUDGET: {who} uses {used} of its {budget} budget"
    return f"VIOLATION: {who} not given it"


@click.command("nodes")
@click.option(
    "--local", "local", is_flag=True, help="Read this machine's GPUs through NVML instead of asking the coordinator."
)
@click.option(
    "--simulate",
    type=click.Path(path_type=Path, dir_okay=False),
    help=(
        "With --local: read a simulated machine (config/sim/*.toml, nvidia-smi -q/-q -x/-L output, or an NVML record)."
    ),
)
@click.option(
    "--record",
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --local: write every NVML call and its answer to this JSON file (replay it with --simulate).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (units in field names; unavailable = null plus <field>_unavailable).",
)
@click.option(
    "--topology",
    is_flag=True,
    help="Print the GPU link matrix (NVLinks, PCIe level, CPUs, NUMA node) like nvidia-smi topo -m.",
)
@click.option(
    "--gpus",
    "--long",
    "-l",
    "per_gpu",
    is_flag=True,
    help="Cluster mode: every GPU and MIG device with who holds it (the default is one line per node, as sinfo).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    envvar="LABGANG_STATE_DIR",
    help="Coordinator state directory (cluster mode); with --local --simulate, whose simulated ranks count "
    "as this machine's (those of other simulated instances do not).",
)
def nodes(
    local: bool,
    simulate: Path | None,
    record: Path | None,
    as_json: bool,
    topology: bool,
    per_gpu: bool,
    state_dir: Path | None,
) -> None:
    """List nodes (one line each, as sinfo), or GPUs and MIG devices with memory, utilisation, SM
    activity, temperature, power and processes.

    \b
    labgang nodes                              every node, one line each (STATE, GPUS(A/I/O/T), MIG...)
    labgang nodes --gpus                       every GPU of every node, with who holds it
    labgang nodes --local                      this machine, through NVML
    labgang nodes --local --simulate config/sim/h100x8.toml
    labgang nodes --local --record capture.json   (then --simulate capture.json)
    labgang nodes --local --topology           GPU links, CPUs and NUMA nodes (add --json)
    """
    if not local:
        if simulate or record:
            raise click.UsageError("--simulate and --record read this machine: add --local")
        _cluster(state_dir, as_json, topology, per_gpu)
        return
    try:
        from labgang.tui.sources import local_scope

        inventory = read_local(simulate, record, local_scope(state_dir) if simulate is not None else None)
    except NvmlUnavailable as exc:
        raise CommandFailed(str(exc), 2) from None
    except FileNotFoundError as exc:
        raise CommandFailed(f"--simulate: no such file: {exc.filename or simulate}", 2, field="simulate") from None
    except ValueError as exc:
        raise CommandFailed(f"--simulate: {exc}", 2, field="simulate") from None
    if topology:
        from labgang.launcher.cli.topology_view import topology_dict, topology_table

        click.echo(to_json(topology_dict(inventory)) if as_json else topology_table(inventory))
    elif as_json:
        click.echo(to_json(inventory.to_dict()))
    else:
        click.echo(inventory_table(inventory))
    if record:
        click.echo(f"recorded NVML calls to {record}", err=True)
