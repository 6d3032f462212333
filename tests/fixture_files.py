"""Where the tests' data files are: ``tests/fixtures/`` in this repository, plus optional extras.

The repository's copies are the source of every parametrized set, so a fresh clone runs the
same cases everywhere. A design folder may add *extra* cases: ``$LABGANG_SHARED`` if set, else
``../shared`` beside the checkout when it exists. An extra is a file there whose path (relative
to its folder) is not already in ``tests/fixtures/``; files with the same name are the
repository's copies and are never read twice. Without a design folder nothing is added, and the
tests assert their expected counts so a missing file cannot shrink a set unnoticed.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

# Repository fixture folder -> the same data's folder inside the design folder.
_SHARED_FOLDERS = {
    "real-gpus": "fixtures/real-gpus",
    "real-topology": "fixtures/real-topology",
    "scenarios": "scenarios",
}
# Provenance notes, not data.
_NOT_DATA = {"README.md", "SOURCES.md", "FORMAT.md"}


def shared_root() -> Path | None:
    """The optional design folder: ``$LABGANG_SHARED`` (which must exist when set) or ``../shared``.

    Raises:
        FileNotFoundError: ``LABGANG_SHARED`` is set but names no directory.
    """
    named = os.environ.get("LABGANG_SHARED")
    if named:
        if not Path(named).is_dir():
            raise FileNotFoundError(f"LABGANG_SHARED: {named} is not a directory (unset it to use tests/fixtures only)")
        return Path(named)
    beside = REPO.parent / "shared"
    return beside if beside.is_dir() else None


def fixture_files(folder: str, pattern: str = "*") -> list[Path]:
    """The data files of ``tests/fixtures/<folder>`` matching ``pattern`` (a glob relative to the
    folder, e.g. ``"peers/*.toml"``), followed by the design folder's extras, each part sorted.

    Args:
        folder: one of ``real-gpus``, ``real-topology``, ``scenarios``.
        pattern: glob relative to the folder.

    Raises:
        KeyError: ``folder`` has no counterpart in the design folder.
    """
    ours_root = FIXTURES / folder
    ours = sorted(p for p in ours_root.glob(pattern) if p.is_file() and p.name not in _NOT_DATA)
    shared = shared_root()
    if shared is None:
        return ours
    theirs_root = shared / _SHARED_FOLDERS[folder]
    known = {p.relative_to(ours_root) for p in ours}
    extras = sorted(
        p
        for p in theirs_root.glob(pattern)
        if p.is_file() and p.name not in _NOT_DATA and p.relative_to(theirs_root) not in known
    )
    return ours + extras


def repository_files(folder: str, pattern: str = "*") -> list[Path]:
    """Only the repository's own data files of ``tests/fixtures/<folder>`` (no extras), sorted."""
    return sorted(p for p in (FIXTURES / folder).glob(pattern) if p.is_file() and p.name not in _NOT_DATA)
