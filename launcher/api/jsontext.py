"""JSON text for the CLI's hot path, without importing :mod:`json` (which imports ``re``).

In a regular install ``import json`` costs a shell command about one interpreter start (``re``
compiles its scanner's patterns and imports ``enum``; docs/cli-startup.md). The hot commands
(``submit``, ``queue``, ``cancel``, ``show``) send and receive small bodies: a submission, one
JobView, one rendered table. This module reads and writes exactly RFC 8259 JSON for them with
public string methods only (no private interpreter module such as ``_json``):

- :func:`dumps` writes what ``json.dumps(value, separators=(",", ":"), allow_nan=False)``
  writes (ASCII only: every non-ASCII character, a lone surrogate too, as ``\\uXXXX``).
- :func:`loads` reads what ``json.loads`` reads, except the non-standard ``NaN`` and
  ``Infinity``, which it refuses (the coordinator never sends them).

Large bodies are better read by :mod:`json`'s C scanner (:func:`worth_reading` tells which;
:func:`labgang.launcher.api.client.decode_body` asks it); tests/cli/test_jsontext.py checks both
functions against :mod:`json` with hypothesis. The coordinator's own JSON is
:mod:`labgang.launcher.api.jsoncodec` (the stdlib json, strict): it starts once, not per command.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MOST_MARKS = 4000
"""The most double quotes and backslashes a body may hold for :func:`loads` to read it rather than
``json.loads`` (:func:`worth_reading`)."""


def worth_reading(body: bytes) -> bool:
    """Whether :func:`loads` reads ``body`` faster than importing :mod:`json` and reading it there.

    Reading costs per string and per escape (about 1.4 us a string, 0.5 us an escape, under load;
    a 2 KiB JobView 0.3 ms, a 1,000-job ``queue`` table 0.55 ms), importing :mod:`json` about 8 ms;
    so a body with at most :data:`MOST_MARKS` quotes and backslashes is read here (a few ms at
    most) and a larger listing (``queue --json``, ``history``) by ``json``'s C scanner.
    """
    return body.count(b'"') + body.count(b"\\") <= MOST_MARKS


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_UNESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WHITESPACE = " \t\n\r"
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


def _string_text(text: str) -> str:
    """``text`` as a JSON string literal, ASCII only, as ``json.dumps`` writes it."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:  # beyond the BMP: a UTF-16 surrogate pair, as json writes it
            code -= 0x10000
            out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    out.append('"')
    return "".join(out)


def dumps(value: "Any") -> str:
    """``value`` as compact JSON text (``json.dumps(value, separators=(",", ":"), allow_nan=False)``).

    Args:
        value: None, bool, int, float, str, a list or tuple of values, a dict with str keys.

    Raises:
        ValueError: a float that is NaN or infinite (RFC 8259 has no such number).
        TypeError: any other type, or a dict key that is not a str.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string_text(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
        return float.__repr__(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"keys must be str, not {type(key).__name__}")
            parts.append(f"{_string_text(key)}:{dumps(item)}")
        return "{" + ",".join(parts) + "}"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The reader is a handful of functions on (text, position) rather than methods on a reader object: a
# hot command reads one or two JobViews in a fresh interpreter, where every attribute access and call
# counts (a 1 KiB JobView read in a fresh interpreter: 1.46M instructions as methods of a reader object,
# 0.77M as these, with a plain key and the ": " / ", " separators taken whole; valgrind's callgrind,
# docs/cli-startup.md).
_WHITESPACE_SET = frozenset(_WHITESPACE)


def _fail(what: str, pos: int) -> "ValueError":
    return ValueError(f"{what} at char {pos}")


def _skip(text: str, pos: int) -> int:
    """The first position from ``pos`` that is not JSON whitespace."""
    while text[pos : pos + 1] in _WHITESPACE_SET:
        pos += 1
    return pos


def _value(text: str, pos: int) -> "tuple[Any, int]":
    """The value that starts at ``pos`` (after any whitespace) and the position after it."""
    char = text[pos : pos + 1]
    if char == '"':
        return _string(text, pos + 1)
    if char == "{":
        return _object(text, pos + 1)
    if char == "[":
        return _array(text, pos + 1)
    if char == "n" and text.startswith("null", pos):
        return None, pos + 4
    if char == "t" and text.startswith("true", pos):
        return True, pos + 4
    if char == "f" and text.startswith("false", pos):
        return False, pos + 5
    if char == "-" or char in _DIGITS:
        return _number(text, pos)
    raise _fail("Expecting value", pos)


def _number(text: str, start: int) -> "tuple[int | float, int]":
    end = start
    while text[end : end + 1] in _NUMBER_CHARS:
        end += 1
    token = text[start:end]
    if token.isdigit() and (token[0] != "0" or end - start == 1):  # the common case: a plain integer
        return int(token), end
    # RFC 8259: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
    mantissa, e, exponent = token.replace("E", "e").partition("e")
    whole, dot, fraction = mantissa.partition(".")
    digits = whole[1:] if whole.startswith("-") else whole
    good = (
        digits.isdigit()
        and digits.isascii()
        and (digits == "0" or not digits.startswith("0"))
        and (not dot or (fraction.isdigit() and fraction.isascii()))
        and (not e or (exponent.lstrip("+-").isdigit() and len(exponent) - len(exponent.lstrip("+-")) <= 1))
    )
    if not good:
        raise _fail("Invalid number", start)
    return (float(token) if dot or e else int(token)), end


def _string(text: str, pos: int) -> "tuple[str, int]":
    """The string whose text starts at ``pos`` (after its opening quote) and the position after it."""
    quote = text.find('"', pos)
    if quote < 0:
        raise _fail("Unterminated string", pos)
    chunk = text[pos:quote]
    if "\\" not in chunk and chunk.isprintable():  # no escape, no control character: the common case
        return chunk, quote + 1
    parts = []
    while True:
        if quote < pos:  # the quote found last was an escaped one
            quote = text.find('"', pos)
            if quote < 0:
                raise _fail("Unterminated string", pos)
        backslash = text.find("\\", pos, quote)
        chunk = text[pos : quote if backslash < 0 else backslash]
        if not chunk.isprintable() and any(ord(char) < 0x20 for char in chunk):
            raise _fail("Invalid control character", pos)
        parts.append(chunk)
        if backslash < 0:
            return "".join(parts), quote + 1
        pos = backslash + 1
        escape = text[pos : pos + 1]
        if escape in _UNESCAPES:
            parts.append(_UNESCAPES[escape])
            pos += 1
            continue
        if escape != "u":
            raise _fail("Invalid \\escape", pos)
        code = _hex4(text, pos + 1)
        pos += 5
        if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos):
            low = _hex4(text, pos + 2)
            if 0xDC00 <= low < 0xE000:  # a surrogate pair: one character beyond the BMP
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                pos += 6
        parts.append(chr(code))


def _hex4(text: str, pos: int) -> int:
    digits = text[pos : pos + 4]
    if len(digits) != 4 or not _HEX.issuperset(digits):
        raise _fail("Invalid \\uXXXX escape", pos)
    return int(digits, 16)


def _array(text: str, pos: int) -> "tuple[list[Any], int]":
    """The array whose items start at ``pos`` (after its ``[``) and the position after it."""
    out: list[Any] = []
    if text[pos : pos + 1] in _WHITESPACE_SET:
        pos = _skip(text, pos)
    if text[pos : pos + 1] == "]":
        return out, pos + 1
    while True:
        item, pos = _value(text, pos)
        out.append(item)
        if text[pos : pos + 1] in _WHITESPACE_SET:
            pos = _skip(text, pos)
        char = text[pos : pos + 1]
        if char == "]":
            return out, pos + 1
        if char != ",":
            raise _fail("Expecting ',' delimiter", pos)
        pos += 1
        if text[pos : pos + 1] in _WHITESPACE_SET:
            pos = _skip(text, pos)


def _object(text: str, pos: int) -> "tuple[dict[str, Any], int]":
    """The object whose members start at ``pos`` (after its ``{``) and the position after it."""
    out: dict[str, Any] = {}
    if text[pos : pos + 1] in _WHITESPACE_SET:
        pos = _skip(text, pos)
    if text[pos : pos + 1] == "}":
        return out, pos + 1
    while True:
        if text[pos : pos + 1] != '"':
            raise _fail("Expecting property name enclosed in double quotes", pos)
        quote = text.find('"', pos + 1)
        key = text[pos + 1 : quote]
        if quote > 0 and "\\" not in key and key.isprintable():  # a plain key (all of a JobView's), as _string
            pos = quote + 1
        else:
            key, pos = _string(text, pos + 1)
        # ": " and ", " as the coordinator writes them, ":" and "," as compact JSON has them, else any whitespace
        if text.startswith(": ", pos):
            pos += 2
        else:
            if text[pos : pos + 1] in _WHITESPACE_SET:
                pos = _skip(text, pos)
            if text[pos : pos + 1] != ":":
                raise _fail("Expecting ':' delimiter", pos)
            pos += 1
        if text[pos : pos + 1] in _WHITESPACE_SET:
            pos = _skip(text, pos)
        out[key], pos = _value(text, pos)
        if text.startswith(", ", pos):
            pos += 2
        else:
            if text[pos : pos + 1] in _WHITESPACE_SET:
                pos = _skip(text, pos)
            char = text[pos : pos + 1]
            if char == "}":
                return out, pos + 1
            if char != ",":
                raise _fail("Expecting ',' delimiter", pos)
            pos += 1
        if text[pos : pos + 1] in _WHITESPACE_SET:
            pos = _skip(text, pos)


def loads(text: str) -> "Any":
    """The value of the JSON text ``text`` (objects as dicts, arrays as lists; a number with a
    fraction or exponent as a float, else an int), as ``json.loads`` reads it.

    Raises:
        ValueError: ``text`` is not one JSON value (the message names the position), holds
            ``NaN``/``Infinity``, which RFC 8259 does not allow, or nests deeper than the
            interpreter's recursion limit.
    """
    try:
        value, pos = _value(text, _skip(text, 0))
    except RecursionError:  # nested deeper than the interpreter recurses: not an answer we read
        raise ValueError("JSON nested too deep") from None
    pos = _skip(text, pos)
    if pos != len(text):
        raise _fail("Extra data", pos)
    return value
