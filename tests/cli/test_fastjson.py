"""launcher/api/fastjson.py and the query-string helpers of launcher/api/wire.py against the stdlib.

The shell commands use them instead of :mod:`json` and :mod:`urllib.parse` (which import ``re``);
they must give exactly what the stdlib gives, errors included.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.api import fastjson, wire

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(DOCUMENTS)
def test_dumps_and_loads_give_what_json_gives(document):
    text = fastjson.dumps(document)
    assert text == json.dumps(document, allow_nan=False)
    assert repr(fastjson.loads(text)) == repr(json.loads(text))  # repr: -0.0 and 0.0, 1 and 1.0 differ


@settings(max_examples=200, deadline=None)
@given(DOCUMENTS, st.sampled_from(["", " ", "\n", "\t\r\n "]), st.sampled_from(["", " ", "\n\n", "\r"]))
def test_loads_skips_json_whitespace_as_json_does(document, before, after):
    text = before + json.dumps(document, indent=1 if isinstance(document, list) else None) + after
    assert repr(fastjson.loads(text)) == repr(json.loads(text))


def _outcome(call, *args):
    """(result, None) or (None, (exception type, message)) of ``call(*args)``."""
    try:
        return repr(call(*args)), None
    except Exception as exc:  # comparing whatever the stdlib raises
        return None, (type(exc), str(exc))


@pytest.mark.parametrize(
    "text",
    ["", " ", "[1,", "[1] x", "{} {}", "\ufeff[]", "nul", '{"a" 1}', "[1,]", '"\\x"', "NaN", "-Infinity", "1e999"],
)
def test_loads_of_a_malformed_or_odd_document_answers_as_json(text):
    fast = _outcome(fastjson.loads, text)
    assert fast == _outcome(json.loads, text)
    assert fast[1] is None or issubclass(fast[1][0], ValueError)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='[]{}",:0123456789.-+eE tfnrulasNIy\\', max_size=20))
def test_loads_of_random_text_answers_as_json(text):
    assert _outcome(fastjson.loads, text) == _outcome(json.loads, text)


def test_loads_of_bytes_answers_as_json():
    assert fastjson.loads(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, {"grace_s": math.inf}, [1, [math.nan]]])
def test_dumps_refuses_nan_and_infinity_as_the_coordinator_does(value):
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        fastjson.dumps(value)


def test_dumps_of_what_json_cannot_write_raises_what_json_raises():
    loop: list[object] = []
    loop.append(loop)
    for value in ({1, 2}, {"a": b"x"}, {("k",): 1}, loop, object()):
        assert _outcome(fastjson.dumps, value) == _outcome(json.dumps, value)
        assert _outcome(fastjson.dumps, value)[1] is not None
    assert fastjson.dumps({"after": "a failure"}) == '{"after": "a failure"}'  # no stale circular-reference marker


def test_without_the_c_accelerator_the_stdlib_does_the_work():
    code = (
        "import sys; sys.modules['_json'] = None\n"
        "from labgang.launcher.api import fastjson\n"
        "assert fastjson.loads(' {\"a\": [1, 2.5, null]} ') == {'a': [1, 2.5, None]}\n"
        "assert fastjson.dumps({'a': [1, 'é']}) == '{\"a\": [1, \"\\\\u00e9\"]}'\n"
        "print('ok', 'json' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["ok", "True"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_quote_is_urllib_quote_with_nothing_safe(text):
    assert wire.quote(text) == urllib.parse.quote(text, safe="")
    assert wire.quote(text, plus=True) == urllib.parse.quote_plus(text, safe="")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4))
def test_urlencode_is_urllib_urlencode(query):
    assert wire.urlencode(query) == urllib.parse.urlencode(query)
