"""Reading a TOML file a person gave us: one clear line for every way it can be wrong.

Used for ``cluster.toml``, ``agent.toml``, scenario files and pitfall thresholds, so
that each says the same thing about a missing file, a binary file or a syntax error.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any


class TomlFileError(ValueError):
    """A user-given TOML file could not be read; ``str()`` is ``"FILE: reason"``.

    Attributes:
        path: the file as given.
        reason: no such file, cannot read (permission, a directory), not UTF-8 text
            (with the first bad byte and its offset), or not valid TOML (line and column).
        syntax: True when the file was read but its text is refused: not valid TOML, nested
            too deeply, or holding an ``inf``/``nan`` (:func:`loads_toml`).
    """

    def __init__(self, path: str, reason: str, *, syntax: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.syntax = syntax


class TomlTextError(ValueError):
    """TOML text that cannot be used (see :func:`loads_toml`); ``str()`` is one line."""


def _non_finite(value: Any, where: str) -> str | None:
    """The key path of the first ``inf``/``nan`` in ``value`` (iterative: any depth), or None."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def loads_toml(text: str) -> dict[str, Any]:
    """Parse TOML text, refusing what parses but no labgang file may hold.

    ``inf`` and ``nan`` are valid TOML floats but no labgang setting, reading or limit
    means them; they are refused here, once, for every file (config, machine, scenario).

    Raises:
        TomlTextError: a syntax error, nesting deeper than the parser can follow (a
            1,000-deep array), or a non-finite float (the message names its key path).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlTextError(f"not valid TOML: {exc}") from None
    except RecursionError:
        raise TomlTextError("not valid TOML: arrays or tables nested too deeply") from None
    where = _non_finite(data, "")
    if where is not None:
        raise TomlTextError(f"{where}: inf and nan are not allowed (allowed: a finite number)")
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read and parse a TOML file (UTF-8, as TOML requires).

    Returns:
        The parsed document.

    Raises:
        TomlFileError: see its ``reason`` (and :func:`loads_toml`).
    """
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise TomlFileError(str(p), "no such file") from None
    except UnicodeDecodeError as exc:
        raise TomlFileError(
            str(p), f"not a TOML file (not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise TomlFileError(str(p), f"cannot read: {exc.strerror or exc}") from None
    try:
        return loads_toml(text)
    except TomlTextError as exc:
        raise TomlFileError(str(p), str(exc), syntax=True) from None
