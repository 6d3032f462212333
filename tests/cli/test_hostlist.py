"""Slurm host lists as ``labgang drain`` and ``resume`` read them (launcher/cli/hostlist.py)."""

from __future__ import annotations

import pytest
from labgang.launcher.cli.hostlist import MAX_HOSTS, HostlistError, expand


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n1", ["n1"]),
        ("n1,n3", ["n1", "n3"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[8-10]", ["gpu8", "gpu9", "gpu10"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("a[1-2],b[3],a1", ["a1", "a2", "b3"]),  # each once, first place kept
        ("n[5]x", ["n5x"]),
    ],
)
def test_a_host_list_names_its_hosts_in_order(text: str, names: list[str]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("n[1-", "a '[' without its ']'"),
        ("n1-]", "a ']' without its '['"),
        ("n[[1]]", "a bracket inside a bracket"),
        ("n1,,n2", "an empty host name (two commas, or one at an end)"),
        ("n[]", "[] holds ''; allowed: numbers and ranges such as 1-4 or 01-08"),
        ("n[a-b]", "[a-b] holds 'a-b'; allowed: numbers and ranges such as 1-4 or 01-08"),
        ("n[3-1]", "the range 3-1 ends below its start"),
        ("n[1-1000000]", f"more than {MAX_HOSTS} hosts"),
        ("n[1-300]m[1-300]", f"more than {MAX_HOSTS} hosts"),
    ],
)
def test_a_bad_host_list_is_one_line_naming_it(text: str, problem: str) -> None:
    with pytest.raises(HostlistError) as caught:
        expand(text)
    assert str(caught.value) == f"host list {text!r}: {problem}"
