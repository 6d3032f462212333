"""JSON for the shell commands' requests and answers, without importing :mod:`json`.

``import json`` costs a shell command about 8 ms in a regular install (bench/cli_latency.py):
:mod:`json.decoder` compiles regular expressions, so it imports :mod:`re` (and with it
:mod:`enum`, :mod:`sre_compile`, :mod:`functools`...), about as much as the whole interpreter
start. The parsing and writing themselves are done by the C accelerator :mod:`_json`, which
imports nothing; this module drives it directly:

- :func:`dumps` is ``json.dumps(value, allow_nan=False)``: the encoder ``json`` builds for its
  one-shot case (``_json.make_encoder`` with ``", "``/``": "`` separators, ASCII output,
  circular-reference markers), and it refuses ``inf``/``nan`` as the coordinator does
  (:func:`labgang.launcher.api.jsoncodec.dumps`).
- :func:`loads` is ``json.loads(text)`` for a ``str``: ``_json.make_scanner`` reads from its
  context exactly ``strict``, ``object_hook``, ``object_pairs_hook``, ``parse_float``,
  ``parse_int`` and ``parse_constant`` (CPython 3.11 ``Modules/_json.c``, ``scanner_new``; the
  memo it keeps itself), and ``float``/``int`` as parsers select its fast paths. What the
  decoder adds around the scanner (skipping JSON whitespace before and after, "Expecting
  value", "Extra data") is repeated here.

Anything out of the ordinary (an error of any kind, bytes input, an interpreter without
``_json``) is handed to :mod:`json` itself, so the result or the exception is exactly the
stdlib's; only the common, well-formed case skips the import.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - every CPython build has it; other interpreters may not
    _json = None  # type: ignore[assignment]

#: JSON's insignificant whitespace (RFC 8259 section 2), what ``json.decoder.WHITESPACE`` matches.
_WHITESPACE = " \t\n\r"


def _parse_constant(name: str) -> float:
    """What ``json`` reads ``NaN``, ``Infinity`` and ``-Infinity`` as (its ``_CONSTANTS``)."""
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _ScannerContext:
    """The attributes ``_json.make_scanner`` reads: those of a default ``json.JSONDecoder``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_parse_constant)


def _refuse_default(value: object) -> object:
    # never reached with a result: the stdlib is asked again to raise its own TypeError
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_scan_once: Callable[[str, int], tuple[Any, int]] | None = None
if _json is not None:
    # typeshed types the context as a make_scanner itself (the attributes it reads are the same)
    _scan_once = _json.make_scanner(_ScannerContext())  # type: ignore[arg-type]


def _stdlib_dumps(value: Any) -> str:
    import json

    return json.dumps(value, allow_nan=False)


def _stdlib_loads(text: str | bytes) -> Any:
    import json

    return json.loads(text)


def dumps(value: Any) -> str:
    """Serialise ``value`` exactly as ``json.dumps(value, allow_nan=False)`` does.

    Args:
        value: dicts (str keys), lists, tuples, str, int, float, bool and None, nested.

    Raises:
        ValueError: ``value`` holds ``inf``, ``-inf`` or ``nan``, or refers to itself.
        TypeError: a value JSON cannot represent (a set, bytes, a non-str key of another kind...).
    """
    if _json is None:
        return _stdlib_dumps(value)
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    # A new encoder each time (microseconds): one that failed midway leaves stale entries in
    # its circular-reference markers. Arguments: markers, default, encoder, indent,
    # key_separator, item_separator, sort_keys, skipkeys, allow_nan.
    encode = _json.make_encoder(
        {}, _refuse_default, _json.encode_basestring_ascii, None, ": ", ", ", False, False, False
    )
    try:
        chunks = encode(value, 0)
    except (TypeError, ValueError, RecursionError):
        return _stdlib_dumps(value)  # raises the stdlib's own error
    return "".join(chunks)


def loads(text: str | bytes) -> Any:
    """Parse one JSON document exactly as ``json.loads(text)`` does.

    Raises:
        json.JSONDecodeError: not one JSON document (a :class:`ValueError`; from :mod:`json`,
            which is imported only then).
        RecursionError: nested deeper than the interpreter's recursion limit, as ``json`` does.
    """
    if _scan_once is None or not isinstance(text, str) or text.startswith("\ufeff"):
        return _stdlib_loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan_once(text, start)
    except (StopIteration, ValueError):
        return _stdlib_loads(text)  # raises the stdlib's JSONDecodeError with its message
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return _stdlib_loads(text)  # "Extra data"
    return value
