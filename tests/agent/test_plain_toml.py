"""agent/paths.py's ``plain_toml`` against :mod:`tomllib`: where it reads a text, it reads what tomllib
reads; whatever it does not read (None) is left to tomllib, which reads or refuses it."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from labgang.agent import paths
from labgang.launcher.cli.install import SYSTEM_TOML

SPACE = st.text(alphabet=" \t", max_size=2)
# mostly bare keys; some keys TOML reads otherwise or refuses (dotted, quoted, empty, odd characters)
BARE = st.text(alphabet="abz_-09", min_size=1, max_size=6)
ODD_KEY = st.sampled_from(["a.b", '"q"', "", "k y", "é", "#"]) | st.text(max_size=4)
KEY = st.one_of(BARE, BARE, BARE, ODD_KEY)
# mostly plain text; some of what must go to tomllib (escapes, quotes, control characters)
PLAIN = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters='"\\\x7f'), max_size=8
)
ODD = st.sampled_from(["\\", '"', "\\n", "\x7f", "\x00", "\r", "\u00a0", "\t"]) | st.text(max_size=3)
VALUE = st.lists(st.one_of(PLAIN, PLAIN, PLAIN, ODD), max_size=3).map("".join)
COMMENT = st.builds(lambda text: "#" + text, VALUE)


@st.composite
def lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["blank", "comment", "pair", "pair", "pair", "other"]))
    if kind == "blank":
        return draw(SPACE)
    if kind == "comment":
        return draw(SPACE) + draw(COMMENT)
    if kind == "other":  # tables, arrays, numbers, literal and multi-line strings, stray text
        return draw(st.sampled_from(["[t]", "a = 1", "a = 'x'", 'a = """x"""', 'a = "x" "y"', "a =", "= 1", "\r"]))
    quote = draw(st.sampled_from(['"'] * 6 + ["'", ""]))
    tail = draw(st.sampled_from(["", " ", "\t"])) + draw(st.sampled_from(["", "", "", "", "", "x"]) | COMMENT)
    return f"{draw(SPACE)}{draw(KEY)}{draw(SPACE)}={draw(SPACE)}{quote}{draw(VALUE)}{quote}{tail}"


TEXTS = st.builds(lambda ls, end: end.join(ls), st.lists(lines(), max_size=5), st.sampled_from(["\n", "\r\n"]))


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])  # a shared, busy machine
@given(TEXTS)
@example("a = 'x'\r")
@example('state_dir = "/srv/labgang"\r')
@example('a = "x"\na = "y"\n')
def test_what_it_reads_tomllib_reads_the_same_and_the_rest_is_left_to_tomllib(text: str) -> None:
    got = paths.plain_toml(text)
    try:
        want = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assert got is None, text
        return
    assert got is None or got == want, text


@pytest.mark.parametrize(
    "text",
    [
        SYSTEM_TOML.decode(),
        "",
        'state_dir = "/srv/labgang"',
        '  state_dir\t=  "/srv/my labgang/é"   # moved to the big disk\r\n# end\r\n',
        'other = "1"\nstate_dir = "/x"\n',
    ],
)
def test_the_plain_form_a_person_writes_is_read_without_tomllib(text: str) -> None:
    assert paths.plain_toml(text) == tomllib.loads(text)


def test_a_command_finding_the_system_instance_does_not_import_tomllib(tmp_path: Path) -> None:
    """Without ``site`` (as the installed ``labgang`` starts), reading the system config that ``labgang
    install`` writes loads neither tomllib nor ``re``; a literal string there is tomllib's to read."""
    (tmp_path / "labgang").symlink_to(Path(__file__).resolve().parents[2], target_is_directory=True)
    config = tmp_path / "system.toml"
    code = (
        "import sys\n"
        "from labgang.agent import paths\n"
        f"paths.system_config_files = lambda: [{str(config)!r}]\n"
        "print(paths.system_state_dir_text(), 'tomllib' in sys.modules, 're' in sys.modules)\n"
    )

    def read() -> list[str]:
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path)}
        done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    config.write_bytes(SYSTEM_TOML.replace(b"/var/lib/labgang", str(tmp_path).encode()))
    assert read() == [str(tmp_path), "False", "False"]
    config.write_text(f"state_dir = '{tmp_path}'\n")
    assert read() == [str(tmp_path), "True", "True"]
