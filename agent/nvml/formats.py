"""Load a simulated machine or an NVML record from a file, detecting the format from its content.

Order of detection (the file name is never consulted):

1. a JSON object with ``"format": "labgang-nvml-record"`` → an NVML record (replayed);
2. ``<nvidia_smi_log`` → ``nvidia-smi -q -x`` XML;
3. ``==============NVSMI LOG==============`` → ``nvidia-smi -q`` text (a transcript's
   ``nvidia-smi -L`` block, when present, supplies MIG UUIDs and profile names);
4. ``Driver Version: … CUDA Version: …`` box → the default ``nvidia-smi`` table (no UUIDs:
   they are derived; MIG devices from its "MIG devices" box);
5. lines ``GPU N: NAME (UUID: …)`` → an ``nvidia-smi -L`` listing;
6. an ``nvidia-smi topo -m`` matrix → a machine of that many GPUs (no names or UUIDs: UUIDs
   are derived) with its topology;
7. TOML with a ``[machine]`` table → a ``config/sim`` machine file.

A ``topo -m`` matrix inside a transcript of formats 2–5 gives that machine its topology.

Anything else whose name ends in ``.toml`` or that has TOML lines (``key = value``,
``[table]``) is parsed as TOML so that its parse error, with line and column, is what the
user sees; other text is "unrecognised format".
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from labgang.agent.nvml.machine import SimMachine, machine_from_toml
from labgang.agent.nvml.simtopo import parse_topo_matrix, topo_block
from labgang.agent.nvml.smi import (
    Capture,
    GpuRecord,
    build_machine,
    capture_from_list,
    capture_from_q_text,
    capture_from_table,
    capture_from_xml,
    list_lines,
    listing_problem,
    merge_list,
    q_block,
    table_block,
)

if TYPE_CHECKING:
    from labgang.agent.nvml.recorder import ReplayNvml

RECORD_FORMAT = "labgang-nvml-record"


_TOML_LINE = re.compile(r"""^[ \t]*(?:\[\[?[ \t]*[A-Za-z0-9_."'-]+|[A-Za-z0-9_"'.-]+[ \t]*=)""", re.M)
"""A line that only TOML has among the formats: a table header or ``key = value``."""


def looks_like_toml(text: str, name: str = "") -> bool:
    """True when ``name`` ends in ``.toml`` or ``text`` has a TOML table header or ``key = value`` line."""
    return name.lower().endswith(".toml") or bool(_TOML_LINE.search(text))


def detect_format(text: str, name: str = "") -> str:
    """Name the format of ``text``: ``"record"``, ``"xml"``, ``"smi-q"``, ``"smi-table"``, ``"smi-L"``,
    ``"smi-topo"`` or ``"toml"``.

    Args:
        text: the file's content.
        name: the file's name; only consulted to report TOML errors for a ``.toml`` file
            that none of the formats recognises.

    Raises:
        ValueError: none of the known formats; for content that is meant as TOML (see
            :func:`looks_like_toml`), the TOML parse error with its line and column, or
            what a TOML machine file lacks.
    """
    head = text.lstrip()
    if head.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"looks like JSON but is not valid JSON: {exc}") from None
        if isinstance(data, dict) and data.get("format") == RECORD_FORMAT:
            return "record"
        raise ValueError(f'JSON file is not an NVML record (expected "format": "{RECORD_FORMAT}")')
    if "<nvidia_smi_log" in text:
        return "xml"
    if q_block(text) is not None:
        return "smi-q"
    if table_block(text) is not None:
        return "smi-table"
    if list_lines(text):
        return "smi-L"
    if topo_block(text) is not None:
        return "smi-topo"
    if re.search(r"^\s*\[machine\]\s*$", text, flags=re.M) or re.search(r"^\s*\[\[gpu\]\]\s*$", text, flags=re.M):
        return "toml"
    if looks_like_toml(text, name):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"not valid TOML: {exc}") from None
        if "machine" in data or "gpu" in data:
            return "toml"
        raise ValueError(
            "a TOML file but not a machine file: expected a [machine] table and [[gpu]] tables "
            f"(config/sim/*.toml); found: {', '.join(sorted(data)) or 'no keys'}"
        )
    raise ValueError(
        "unrecognised format; expected a config/sim TOML machine file, nvidia-smi -q -x XML, "
        "nvidia-smi -q text, an nvidia-smi -L listing or a labgang NVML record (JSON)"
    )


def machine_from_text(text: str, source: str = "", hostname: str | None = None) -> SimMachine:
    """Build a :class:`SimMachine` from any non-record format.

    Raises:
        ValueError: unrecognised or invalid content; a record (use :func:`load_machine_or_record`).
    """
    fmt = detect_format(text, source)
    host = hostname or ("sim-" + Path(source).stem if source else "sim")
    if fmt == "toml":
        return machine_from_toml(text, source)
    if fmt == "xml":
        cap = capture_from_xml(text)
    elif fmt == "smi-q":
        cap = capture_from_q_text(q_block(text) or "")
        listing = list_lines(text)
        if listing:
            merge_list(cap, capture_from_list(listing))
    elif fmt == "smi-table":
        cap = capture_from_table(table_block(text) or "")
        listing = list_lines(text)
        if listing:
            merge_list(cap, capture_from_list(listing))
    elif fmt == "smi-L":
        problem = listing_problem(text)  # a whole listing: every line is read, none dropped
        if problem is not None:
            raise ValueError(problem)
        cap = capture_from_list(list_lines(text))
    elif fmt == "smi-topo":
        count, _ = parse_topo_matrix(topo_block(text) or [])
        cap = Capture(gpus=[GpuRecord() for _ in range(count)])
    else:
        raise ValueError(f"{source}: an NVML record is replayed, not turned into a machine")
    machine = build_machine(cap, host, source)
    machine.source = f"{source} ({fmt})"
    block = topo_block(text)
    if block is not None:
        count, topology = parse_topo_matrix(block)
        if count != len(machine.gpus):
            raise ValueError(f"{source}: nvidia-smi topo -m shows {count} GPUs but the capture has {len(machine.gpus)}")
        machine.topology = topology
    return machine


def load_machine_or_record(path: Path) -> SimMachine | ReplayNvml:
    """A :class:`SimMachine`, or a :class:`~labgang.agent.nvml.recorder.ReplayNvml` for a record.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not UTF-8 text, unrecognised or invalid content (the message names the file).
    """
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not a text file (not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "expected a machine file, nvidia-smi output or an NVML record"
        ) from None
    try:
        if detect_format(text, str(path)) == "record":
            from labgang.agent.nvml.recorder import ReplayNvml

            return ReplayNvml(json.loads(text), source=str(path))
        return machine_from_text(text, str(path))
    except ValueError as exc:
        message = str(exc)
        raise ValueError(message if message.startswith(str(path)) else f"{path}: {message}") from None


__all__ = ["RECORD_FORMAT", "detect_format", "load_machine_or_record", "looks_like_toml", "machine_from_text"]
