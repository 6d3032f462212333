"""Memory sizes as Slurm writes them (``--mem 16G``, ``--mem-per-gpu 8000``), in bytes.

A size is a whole number with an optional unit: ``K``, ``M`` (the default, as Slurm), ``G`` or
``T``, powers of 1024, optionally followed by ``B`` or ``iB`` (``16G``, ``16GB``, ``16GiB`` are one
size). Also used for the agent's ``reserve_memory``. No click, no heavy imports: the CLI's fast
path parses ``--mem`` with it. It lives with the agent, which never imports the launcher.
"""

from __future__ import annotations

_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
ALLOWED = "a whole number with an optional unit K, M (default), G or T, e.g. 16G or 8000"

MAX_MEMORY = 1 << 60
"""The largest size labgang takes (1,048,576T, 2**60 bytes): past any machine, and what the
coordinator's API accepts for ``mem``, ``mem_per_gpu`` and ``gpu_mem``."""


def parse_mem(text: str, *, zero: bool = False) -> int:
    """Bytes of a memory size such as ``"16G"`` (``"8000"`` is 8000 MiB, as in Slurm).

    Args:
        text: the size as the user wrote it.
        zero: accept 0 (else the size must be above 0).

    Raises:
        ValueError: not a size, 0 without ``zero``, or over :data:`MAX_MEMORY`; the message says
            what is allowed.
    """
    # str methods, not ``re``: importing ``re`` costs a shell command ~8 ms (docs/cli-startup.md)
    rest, suffix, unit = text.strip().lower(), "", ""
    for ending in ("ib", "b"):
        if rest.endswith(ending):
            rest, suffix = rest[: -len(ending)], ending
            break
    if rest[-1:] in _UNITS:
        rest, unit = rest[:-1], rest[-1]
    digits = rest.rstrip()
    if not (digits.isascii() and digits.isdigit()) or (suffix and not unit):
        raise ValueError(f"{text!r} is not a memory size; allowed: {ALLOWED}")
    size = int(digits) * _UNITS[unit or "m"]
    if size == 0 and not zero:
        raise ValueError(f"{text!r}: the size must be above 0; allowed: {ALLOWED}")
    if size > MAX_MEMORY:
        raise ValueError(f"{text!r} is over {MAX_MEMORY // _UNITS['t']}T, the most labgang takes; allowed: {ALLOWED}")
    return size


def format_mem(size: int) -> str:
    """``size`` bytes as a short text: ``"16G"``, ``"1536M"``, ``"100K"`` (exact, largest whole unit)."""
    for unit, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def size_text(size: float, *, short: bool = False) -> str:
    """``size`` bytes as a person reads a memory size: whole MiB under 1 GiB, else GiB with one
    decimal: ``"16 MiB"``, ``"512 MiB"``, ``"1.5 GiB"``, ``"80.0 GiB"``; with ``short`` the
    compact form of a table cell: ``"16M"``, ``"1.5G"``. The one formatter of device and host memory
    in labgang's messages, so a 16 MiB ``--gpu-mem`` budget never reads ``0.0 GiB``. A negative
    size (never expected) is shown as 0."""
    size = max(0.0, float(size))
    if size >= 1024**3:
        value, unit = f"{size / 1024**3:.1f}", "G"
    else:
        value, unit = f"{size / 1024**2:.0f}", "M"
    return f"{value}{unit}" if short else f"{value} {unit}iB"
