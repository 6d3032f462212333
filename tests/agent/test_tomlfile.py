"""One reader for every user-given TOML file: each failure is one line naming the file."""

import subprocess
import sys

import pytest
from labgang.agent.tomlfile import TomlFileError, read_toml


@pytest.mark.parametrize(
    "content, reason, syntax",
    [
        (None, "no such file", False),
        (b"\x00\xff", "not a TOML file (not UTF-8 text: byte 0xff at offset 1)", False),
        (b"[a\n", "not valid TOML: ", True),
    ],
    ids=["missing", "binary", "syntax"],
)
def test_each_failure_is_one_reason(tmp_path, content, reason, syntax):
    path = tmp_path / "f.toml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TomlFileError) as caught:
        read_toml(path)
    assert caught.value.reason.startswith(reason)
    assert caught.value.syntax is syntax
    assert str(caught.value) == f"{path}: {caught.value.reason}"
    assert "\n" not in str(caught.value)


def test_a_directory_cannot_be_read(tmp_path):
    with pytest.raises(TomlFileError, match="cannot read"):
        read_toml(tmp_path)


def test_valid_toml_parses(tmp_path):
    (tmp_path / "ok.toml").write_text('a = 1\n[b]\nc = "d"\n')
    assert read_toml(tmp_path / "ok.toml") == {"a": 1, "b": {"c": "d"}}


@pytest.mark.parametrize("content", [None, b"\x00\xff"], ids=["missing", "binary"])
def test_agent_with_a_bad_simulate_file_says_one_line_and_exits_2(tmp_path, repo_root, content):
    machine = tmp_path / "m.toml"
    if content is not None:
        machine.write_bytes(content)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "labgang.launcher",
            "agent",
            "--config",
            str(repo_root / "config" / "agent.toml"),
            "--simulate",
            str(machine),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"labgang agent: {machine}"), out.stderr
    assert "Traceback" not in out.stderr
