"""A LaunchSpec's ``stdin`` (``labgang run``'s standard input for rank 0): base64 within the bound,
kept through ``to_dict``/``from_dict``, refused otherwise naming the field."""

from __future__ import annotations

import base64

import pytest
from labgang.agent.supervisor import InvalidSpec, LaunchSpec
from labgang.agent.supervisor.spec import MAX_STDIN_BYTES


def test_stdin_round_trips_and_is_left_out_when_unset(make_spec) -> None:
    text = base64.b64encode(b"hello\n").decode()
    spec = make_spec(["cat"], stdin=text)
    assert LaunchSpec.from_dict(spec.to_dict()).stdin == text
    assert "stdin" not in make_spec(["cat"]).to_dict()


@pytest.mark.parametrize("bad", ["not base64!", 42, base64.b64encode(b"x" * (MAX_STDIN_BYTES + 1)).decode()])
def test_bad_stdin_is_refused_naming_the_field(make_spec, bad) -> None:
    with pytest.raises(InvalidSpec) as info:
        make_spec(["cat"], stdin=bad)
    assert "stdin" in str(info.value)
