"""User-given text (job names, commands, messages) made safe for one terminal line.

A job name with a newline or an ANSI escape would break every table row and the TUI;
the coordinator refuses such names at submission (:func:`control_characters`), and
everything that prints user-given text escapes what may already be stored (:func:`printable`).
"""

from __future__ import annotations

import unicodedata

# Unicode categories that move the cursor, change colours or split lines when printed:
# control characters (C0, DEL, C1: newline, ESC), format characters (bidi overrides),
# and the line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _escape(char: str) -> str:
    return repr(char)[1:-1] if char not in "'\"" else char


def control_characters(text: str) -> list[str]:
    """The distinct unsafe characters in ``text``, escaped as Python writes them (``\\n``, ``\\x1b``), in order."""
    return list(dict.fromkeys(_escape(c) for c in text if unicodedata.category(c) in _UNSAFE_CATEGORIES))


def printable(text: str) -> str:
    """``text`` with every unsafe character escaped (``"a\\nb"`` → ``a\\nb`` on one line); other text unchanged."""
    if not any(unicodedata.category(c) in _UNSAFE_CATEGORIES for c in text):
        return text
    return "".join(_escape(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text)
