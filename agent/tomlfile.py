"""Reading a TOML file a person gave us: one clear line for every way it can be wrong.

Used for ``cluster.toml``, ``agent.toml``, scenario files and pitfall thresholds, so
that each says the same thing about a missing file, a binary file or a syntax error.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any


class TomlFileError(ValueError):
    """A user-given TOML file could not be read; ``str()`` is ``"FILE: reason"``.

    Attributes:
        path: the file as given.
        reason: no such file, cannot read (permission, a directory), not UTF-8 text
            (with the first bad byte and its offset), or not valid TOML (line and column).
        syntax: True when the file was read but is not valid TOML.
    """

    def __init__(self, path: str, reason: str, *, syntax: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.syntax = syntax


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read and parse a TOML file (UTF-8, as TOML requires).

    Returns:
        The parsed document.

    Raises:
        TomlFileError: see its ``reason``.
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
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlFileError(str(p), f"not valid TOML: {exc}", syntax=True) from None
