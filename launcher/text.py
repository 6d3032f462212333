"""User-given text (job names, commands, messages) made safe for one terminal line, and tables of it.

A job name with a newline or an ANSI escape would break every table row and the TUI;
the coordinator refuses such names at submission (:func:`control_characters`), and
everything that prints user-given text escapes what may already be stored (:func:`printable`).
A name in CJK script takes two terminal columns per character: :func:`render_table` aligns by
the columns a cell takes on a terminal (:func:`display_width`), not by its length.
"""

from __future__ import annotations

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

# Unicode categories that move the cursor, change colours or split lines when printed:
# control characters (C0, DEL, C1: newline, ESC), format characters (bidi overrides),
# and the line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _escape(char: str) -> str:
    return repr(char)[1:-1] if char not in "'\"" else char


def control_characters(text: str) -> list[str]:
    """The distinct unsafe characters in ``text``, escaped as Python writes them (``\\n``, ``\\x1b``), in order."""
    if text.isprintable():  # C-speed check: every unsafe category is also not printable
        return []
    import unicodedata  # here: a shared library to load, ~0.7 ms of `labgang submit` (docs/cli-startup.md)

    return list(dict.fromkeys(_escape(c) for c in text if unicodedata.category(c) in _UNSAFE_CATEGORIES))


def printable(text: str) -> str:
    """``text`` with every unsafe character escaped (``"a\\nb"`` → ``a\\nb`` on one line); other text unchanged."""
    if text.isprintable():  # C-speed check: every unsafe category is also not printable
        return text
    import unicodedata

    if not any(unicodedata.category(c) in _UNSAFE_CATEGORIES for c in text):
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text)


_EMOJI_PRESENTATION = "\ufe0f"  # variation selector 16: the character before it is drawn as a (wide) emoji


def _char_widths(text: str) -> list[int]:
    """Each character's terminal columns (see :func:`display_width`)."""
    import unicodedata

    widths: list[int] = []
    for char in text:
        if char == _EMOJI_PRESENTATION and widths and widths[-1] == 1:
            widths[-1] = 2  # "❤" is narrow, "❤️" a wide emoji
            widths.append(0)
        elif unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            widths.append(0)
        else:
            widths.append(2 if unicodedata.east_asian_width(char) in ("W", "F") else 1)
    return widths


def display_width(text: str) -> int:
    """How many terminal columns ``text`` takes: 2 for each wide or fullwidth character (East Asian
    Width ``W`` or ``F``: CJK, most emoji) and for a narrow one drawn as an emoji (followed by
    variation selector 16, ``❤️``), 0 for combining marks and format characters, 1 for the rest."""
    if text.isascii():
        return len(text)
    return sum(_char_widths(text))


def clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal columns (:func:`display_width`), ending in ``~``
    when something was cut; a combining mark stays with its character."""
    if display_width(text) <= width:
        return text
    used, end = 0, 0
    for i, w in enumerate(_char_widths(text)):
        if used + w > width - 1:
            break
        used, end = used + w, i + 1
    return text[:end] + "~"


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces, like ``squeue``; trailing blanks trimmed.

    Args:
        headers: column titles.
        rows: one sequence per row, as many cells as ``headers``; cells are str()-ed and
            control characters in them escaped (:func:`printable`), so a job name with a
            newline or an ANSI escape stays in its cell.

    Returns:
        The table (:func:`align`).

    Raises:
        ValueError: a row with another number of cells than ``headers``.
    """
    text_rows = [[str(c) for c in row] for row in rows]
    # One C-speed check of every cell at once (``watch labgang queue`` with thousands of jobs);
    # cell by cell only when something needs escaping.
    if not "".join([c for row in text_rows for c in row]).isprintable():
        text_rows = [[printable(c) for c in row] for row in text_rows]
    return align(headers, text_rows)


def align(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """:func:`render_table` of cells that are already printable strings (:func:`printable`).

    Columns are aligned by :func:`display_width`, so wide characters do not push the columns
    after them out of line.

    Returns:
        The header line and one line per row joined with newlines (no trailing newline).

    Raises:
        ValueError: a row with another number of cells than ``headers``.
    """
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, table has {len(headers)} columns")
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    if "".join([c for row in rows for c in row]).isascii():  # one C-speed check: len is the width
        widths = [max(len(h), max(map(len, column), default=0)) for h, column in zip(headers, columns, strict=True)]
        line = "  ".join(f"{{:<{w}}}" for w in widths)  # each cell left-aligned to its column's width
        return "\n".join([line.format(*row).rstrip() for row in [headers, *rows]])
    widths = [
        max(display_width(h), max(map(display_width, column), default=0))
        for h, column in zip(headers, columns, strict=True)
    ]
    return "\n".join(
        "  ".join(cell + " " * (w - display_width(cell)) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    )
