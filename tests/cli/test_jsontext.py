"""launcher/api/jsontext.py against the stdlib json: the same text out, the same values in."""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.api import client, jsontext

# Every code point, lone surrogates included (argv may carry them: surrogateescape'd bytes).
any_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers() | finite | any_text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(any_text, inner, max_size=5),
    max_leaves=30,
)


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


@settings(max_examples=400)
@given(any_text)
def test_a_string_is_written_as_json_writes_it_and_read_back(text):
    assert jsontext.dumps(text) == compact(text)
    assert jsontext.loads(jsontext.dumps(text)) == text
    assert jsontext.loads(json.dumps(text, ensure_ascii=False)) == text  # raw non-ASCII, as a server may send


@settings(max_examples=300)
@given(values)
def test_any_value_round_trips_and_matches_json(value):
    text = jsontext.dumps(value)
    assert text == compact(value)
    assert jsontext.loads(text) == json.loads(text)
    pretty = json.dumps(value, indent=2, ensure_ascii=False)  # whitespace everywhere it may be
    assert jsontext.loads(pretty) == json.loads(pretty)


@pytest.mark.parametrize(
    "text",
    ["0", "-0", "12", "-3.5", "1e5", "1E+5", "2.5e-3", "-0.0", "123456789012345678901234567890", '"\\/"', '"\\u00e9"'],
)
def test_numbers_and_escapes_read_as_json_reads_them(text):
    got, want = jsontext.loads(text), json.loads(text)
    assert (got, type(got)) == (want, type(want))


def test_a_surrogate_pair_is_one_character_and_a_lone_one_stays():
    assert jsontext.loads('"\\ud83d\\ude00"') == "\U0001f600"
    assert jsontext.loads('"\\ud800\\u0041"') == "\ud800A" == json.loads('"\\ud800\\u0041"')
    assert jsontext.loads('"\\udc00"') == "\udc00"


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "01",
        "-",
        "1.",
        ".5",
        "1e",
        "1e+-5",
        "+1",
        "NaN",
        "Infinity",
        "-Infinity",
        '"abc',
        '"a\nb"',
        '"\\x"',
        '"\\u12"',
        '"\\u12G4"',
        "[1,]",
        "[1 2]",
        '{"a" 1}',
        '{"a":1,}',
        "{1:2}",
        "tru",
        "[] []",
        "{",
        "[",
    ],
)
def test_what_is_not_json_is_refused_with_a_value_error(text):
    with pytest.raises(ValueError, match=r"at char \d+$"):
        jsontext.loads(text)


def test_deep_nesting_is_a_value_error_not_a_recursion_error():
    with pytest.raises(ValueError, match="nested too deep"):
        jsontext.loads("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1.0, {"x": math.nan}]])
def test_non_finite_numbers_are_refused_as_json_refuses_them(value):
    with pytest.raises(ValueError):
        compact(value)
    with pytest.raises(ValueError):
        jsontext.dumps(value)


@pytest.mark.parametrize("value", [{1: "a"}, {None: 1}, {"s": {1, 2}}, b"bytes", object()])
def test_other_types_and_keys_are_a_type_error(value):
    with pytest.raises(TypeError):
        jsontext.dumps(value)


def test_tuples_and_int_subclasses_are_written_as_json_writes_them():
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    value = {"argv": ("python", "x.py"), "level": Level.HIGH, "on": True}
    assert jsontext.dumps(value) == compact(value)


def test_the_client_reads_a_long_listing_with_json_and_a_job_or_a_table_with_jsontext(monkeypatch):
    job = {"job": {"id": "7", "argv": ["é", "\x00"], "env": {"A": "1"}}}
    table = {"table": "\n".join(f"{n:>7} default alice x PD" for n in range(1000)), "jobs": 1000}
    listing = {"jobs": [{"id": str(n), "name": "x"} for n in range(1000)]}
    read = []
    monkeypatch.setattr(jsontext, "loads", lambda text: read.append(len(text)) or json.loads(text))
    monkeypatch.delitem(sys.modules, "json")  # as in a fresh hot command (restored afterwards)
    for value, ours in ((job, True), (table, True), (listing, False)):
        body = compact(value).encode()
        assert jsontext.worth_reading(body) is ours
        read.clear()
        assert client.decode_body(body) == value
        assert bool(read) is ours


def test_the_client_refuses_a_body_that_is_not_json(monkeypatch):
    monkeypatch.delitem(sys.modules, "json")  # as in a fresh hot command, where jsontext reads it
    with pytest.raises(ValueError):
        client.decode_body(b'{"job": NaN}')
    with pytest.raises(ValueError):
        client.decode_body(b"\xff")


def test_once_json_is_imported_every_body_goes_to_it(monkeypatch):
    monkeypatch.setattr(jsontext, "loads", lambda text: pytest.fail("jsontext read a body"))
    assert "json" in sys.modules
    assert client.decode_body(b'{"job": {"id": "7"}}') == {"job": {"id": "7"}}
