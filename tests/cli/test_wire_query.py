"""The query-string helpers of launcher/api/wire.py against the stdlib, and the client's JSON bodies.

The shell commands use the helpers instead of :mod:`urllib.parse` (which imports ``re`` and ``ipaddress``);
they must give exactly what the stdlib gives. Bodies are the stdlib json's (docs/cli-startup.md).
"""

from __future__ import annotations

import math
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.api import wire
from labgang.launcher.api.client import Client


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, {"grace_s": math.inf}, [1, [math.nan]]])
def test_a_request_body_with_nan_or_infinity_is_refused_before_it_is_sent(value, tmp_path):
    """The client writes bodies with the stdlib json (allow_nan=False), as the coordinator reads them:
    nothing is sent (no socket is there to send to)."""
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        Client(tmp_path / "labgang.sock", wait_for_start=False).request("POST", "/v1/jobs", body=value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_quote_is_urllib_quote_with_nothing_safe(text):
    assert wire.quote(text) == urllib.parse.quote(text, safe="")
    assert wire.quote(text, plus=True) == urllib.parse.quote_plus(text, safe="")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4))
def test_urlencode_is_urllib_urlencode(query):
    assert wire.urlencode(query) == urllib.parse.urlencode(query)
