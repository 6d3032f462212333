"""JSON in and out of the user API, strict where Python's json module is lenient.

Python's :mod:`json` writes ``Infinity`` and ``NaN`` (not JSON: every other client fails to
parse the whole answer) and reads them back; it also recurses once per nesting level, so a
body nested a thousand deep raises :class:`RecursionError` instead of a parse error. Both
ends of the API go through here: :func:`dumps` refuses non-finite numbers, :func:`loads`
refuses deep nesting with a :class:`ValueError` of one line. ``NaN`` and ``1e999`` are read
as floats so that the schema that checks the document can name the field they are in.
"""

from __future__ import annotations

import json
from typing import Any

#: Deepest nesting of arrays and objects a request body may have (a job spec needs 3).
MAX_DEPTH = 64


def dumps(value: Any) -> str:
    """Serialise ``value`` as strict JSON.

    Raises:
        ValueError: ``value`` holds ``inf``, ``-inf`` or ``nan`` (never sent as ``Infinity``).
        TypeError: a value JSON cannot represent.
    """
    return _STRICT.encode(value)


_STRICT = json.JSONEncoder(allow_nan=False)
"""What ``json.dumps(value, allow_nan=False)`` builds on every call, built once (it keeps no state
between calls: every ``encode`` makes its own C encoder)."""


def _depth(text: str | bytes) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (a linear scan, no recursion)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return 0  # cannot be deeper than the limit: skip the scan
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON without recursing past ``max_depth``.

    Raises:
        ValueError: not JSON, or arrays and objects nested deeper than ``max_depth``; the
            message is one line.
    """
    if _depth(text) > max_depth:
        raise ValueError(f"arrays and objects are nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError(f"arrays and objects are nested deeper than {max_depth} levels") from None
