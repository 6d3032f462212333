"""`labgang install` into a temporary prefix: what it writes, modes, and what it refuses to replace."""

from __future__ import annotations

import base64
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.install import COORDINATOR_CREDENTIAL, install
from labgang.launcher.config.cluster import load_config

LABGANG = Path(sys.executable).parent / "labgang"
COORD_FILES = (
    "etc/systemd/system/labgang-coordinator.service",
    "etc/sysusers.d/labgang.conf",
    "etc/labgang/cluster.toml",
    "etc/labgang/system.toml",
    "etc/labgang/cluster.token",
)


def run(*args: str):
    return CliRunner().invoke(install, [*args, "--bin", str(LABGANG)], catch_exceptions=False)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_coordinator_install_writes_units_config_and_secret_token(tmp_path):
    result = run("--role", "coordinator", "--prefix", str(tmp_path))
    assert result.exit_code == 0, result.output
    for rel in COORD_FILES:
        assert (tmp_path / rel).is_file(), rel
        assert f"written  {tmp_path / rel}" in result.output
    token = tmp_path / "etc/labgang/cluster.token"
    assert mode(token) == 0o600
    assert len(base64.urlsafe_b64decode(token.read_text().strip() + "=")) == 32
    assert mode(tmp_path / "etc/labgang/cluster.toml") == 0o644
    unit = (tmp_path / COORD_FILES[0]).read_text()
    assert f"ExecStart={LABGANG} coordinator --config /etc/labgang/cluster.toml" in unit
    assert "/usr/local/bin/labgang" not in unit
    assert not (tmp_path / "etc/systemd/system/labgang-agent.service").exists()
    # every user's CLI finds the services' socket through the system config, with no variable
    assert tomllib.loads((tmp_path / "etc/labgang/system.toml").read_text()) == {"state_dir": "/var/lib/labgang"}
    assert mode(tmp_path / "etc/labgang/system.toml") == 0o644
    assert not (tmp_path / "etc/profile.d").exists()


def test_installed_cluster_config_is_valid_and_reads_the_systemd_credential(tmp_path):
    assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    cfg = load_config(tmp_path / "etc/labgang/cluster.toml")
    assert cfg.token_file == COORDINATOR_CREDENTIAL
    assert cfg.queues, "the example must carry a first queue config"


@pytest.mark.skipif(
    shutil.which("systemd-sysusers") is None,
    reason="systemd-sysusers absent (apt-get install systemd); user creation is reported instead",
)
def test_coordinator_install_creates_the_system_user_in_the_prefix(tmp_path):
    result = run("--role", "coordinator", "--prefix", str(tmp_path))
    passwd = (tmp_path / "etc/passwd").read_text().splitlines()
    entry = next(line for line in passwd if line.startswith("labgang:"))
    fields = entry.split(":")
    # The line names the file it checked, not "system user present": this host's users are unchanged.
    assert "system user 'labgang' present" not in result.output
    assert (
        f"user 'labgang' (uid {fields[2]}) found in {tmp_path}/etc/passwd (systemd-sysusers --root={tmp_path}); "
        "this host's own users are unchanged"
    ) in result.output
    assert int(fields[2]) < 1000 and fields[5] == "/var/lib/labgang" and fields[6].endswith("nologin")


def test_second_install_refuses_and_changes_nothing(tmp_path):
    assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    unit = tmp_path / COORD_FILES[0]
    unit.write_text("# edited by the admin\n")
    before = {rel: (tmp_path / rel).read_bytes() for rel in COORD_FILES}
    result = run("--role", "coordinator", "--prefix", str(tmp_path))
    assert result.exit_code == 1
    assert "nothing was written" in result.output and "--force" in result.output
    assert str(unit) in result.output
    assert "cluster.token" not in result.output  # an existing token is kept, not a conflict
    assert {rel: (tmp_path / rel).read_bytes() for rel in COORD_FILES} == before


def test_coordinator_then_agent_into_one_prefix_shares_identical_files(tmp_path):
    """Both roles write etc/labgang/system.toml with the same content: not a conflict."""
    assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    token = (tmp_path / "etc/labgang/cluster.token").read_bytes()
    result = run("--role", "agent", "--prefix", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert f"unchanged {tmp_path / 'etc/labgang/system.toml'}" in result.output
    assert f"written  {tmp_path / 'etc/systemd/system/labgang-agent.service'}" in result.output
    assert f"kept     {tmp_path / 'etc/labgang/cluster.token'}" in result.output
    assert (tmp_path / "etc/labgang/cluster.token").read_bytes() == token


def test_repeating_an_install_leaves_identical_files_unchanged(tmp_path):
    assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    again = run("--role", "coordinator", "--prefix", str(tmp_path))
    assert again.exit_code == 0, again.output
    for rel in COORD_FILES[:-1]:
        assert f"unchanged {tmp_path / rel}" in again.output
    assert "replaced" not in again.output and "written" not in again.output


def test_installed_example_configs_pass_config_check(tmp_path):
    from labgang.launcher.cli.config import config

    assert run("--prefix", str(tmp_path)).exit_code == 0
    for name, kind in (("cluster.toml", "cluster"), ("agent.toml", "agent")):
        path = tmp_path / "etc/labgang" / name
        res = CliRunner().invoke(config, ["check", str(path)])
        assert res.exit_code == 0, res.output
        assert f"{path}: {kind} config ok" in res.output


@pytest.mark.parametrize("name", ["cluster.toml", "agent.toml"])
def test_installed_configs_have_no_orphaned_comment_lines(tmp_path, name):
    """An indented comment line continues the remark on the line above: that remark must
    still be there, starting in the same column (the install rewrites token_file's line)."""
    assert run("--prefix", str(tmp_path)).exit_code == 0
    lines = (tmp_path / "etc/labgang" / name).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(" ") and line.lstrip().startswith("#"):
            column = line.index("#")
            assert i > 0 and lines[i - 1].find("#") == column, (
                f"{name} line {i + 1} continues a remark that is not above it: {line.strip()!r}"
            )


def test_force_replaces_files_but_keeps_the_token(tmp_path):
    assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    token = (tmp_path / "etc/labgang/cluster.token").read_bytes()
    (tmp_path / COORD_FILES[0]).write_text("# edited\n")
    result = run("--role", "coordinator", "--prefix", str(tmp_path), "--force")
    assert result.exit_code == 0, result.output
    assert f"replaced {tmp_path / COORD_FILES[0]}" in result.output
    assert f"kept     {tmp_path / 'etc/labgang/cluster.token'}" in result.output
    assert "ExecStart=" in (tmp_path / COORD_FILES[0]).read_text()
    assert (tmp_path / "etc/labgang/cluster.token").read_bytes() == token


def test_token_from_installs_the_coordinators_token_and_replaces_only_with_force(tmp_path):
    theirs = tmp_path / "from-coordinator.token"
    theirs.write_text("s3cret-from-the-coordinator\n")
    prefix = tmp_path / "node"
    assert run("--role", "coordinator", "--prefix", str(prefix)).exit_code == 0
    refused = run("--role", "coordinator", "--prefix", str(prefix), "--token-from", str(theirs))
    assert refused.exit_code == 1 and "cluster.token" in refused.output
    ok = run("--role", "coordinator", "--prefix", str(prefix), "--token-from", str(theirs), "--force")
    assert ok.exit_code == 0, ok.output
    token = prefix / "etc/labgang/cluster.token"
    assert token.read_text() == "s3cret-from-the-coordinator\n" and mode(token) == 0o600


def test_print_writes_nothing_and_never_shows_the_secret(tmp_path):
    theirs = tmp_path / "t"
    theirs.write_text("do-not-print-me-ever\n")
    result = run("--role", "coordinator", "--prefix", str(tmp_path / "p"), "--print", "--token-from", str(theirs))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "p").exists()
    assert f"# ==> {tmp_path / 'p' / COORD_FILES[0]} (mode 0644) <==" in result.output
    assert "Type=notify" in result.output and "[[queues]]" in result.output
    assert "do-not-print-me" not in result.output
    assert "(mode 0600)" in result.output


def test_bad_bin_is_refused_naming_the_option(tmp_path):
    not_exec = tmp_path / "labgang"
    not_exec.write_text("")
    result = CliRunner().invoke(install, ["--prefix", str(tmp_path / "p"), "--bin", str(not_exec)])
    assert result.exit_code == 1 and "--bin" in result.output and "not an executable" in result.output
    assert not (tmp_path / "p").exists()


def test_token_mode_does_not_depend_on_the_umask(tmp_path):
    """The token is opened with mode 0600 and fchmod-ed: a umask of 0 must not widen it."""
    old = os.umask(0)
    try:
        assert run("--role", "coordinator", "--prefix", str(tmp_path)).exit_code == 0
    finally:
        os.umask(old)
    assert mode(tmp_path / "etc/labgang/cluster.token") == 0o600


def test_gpu_node_install_takes_the_coordinators_token(tmp_path):
    from labgang.agent.config import load_agent_config
    from labgang.agent.token import read_token

    theirs = tmp_path / "cluster.token"
    theirs.write_text("the-coordinators-token\n")
    prefix = tmp_path / "gpu01"
    result = run("--role", "agent", "--prefix", str(prefix), "--token-from", str(theirs))
    assert result.exit_code == 0, result.output
    unit = (prefix / "etc/systemd/system/labgang-agent.service").read_text()
    assert f"ExecStart={LABGANG} agent --config /etc/labgang/agent.toml" in unit
    assert not (prefix / "etc/systemd/system/labgang-coordinator.service").exists()
    assert not (prefix / "etc/sysusers.d/labgang.conf").exists()
    cfg = load_agent_config(prefix / "etc/labgang/agent.toml")
    assert cfg.token_file == "/etc/labgang/cluster.token"
    assert (
        read_token(prefix / "etc/labgang/cluster.token") == "the-coordinators-token"
    )  # owner-only, as the agent demands


def test_installed_units_verify(tmp_path):
    """What `labgang install` writes is what systemd accepts (verify needs the ExecStart binary: --bin exists)."""
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.fail("systemd-analyze not found: on Debian/Ubuntu run `apt-get install systemd`")
    assert run("--prefix", str(tmp_path)).exit_code == 0
    units = sorted((tmp_path / "etc/systemd/system").glob("*.service"))
    assert [u.name for u in units] == ["labgang-agent.service", "labgang-coordinator.service"]
    result = subprocess.run([exe, "verify", *map(str, units)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "labgang" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    "data, problem",
    [
        (bytes(range(256)) * 8, "has a space or control character at offset 0 (0x00)"),
        ("ab\u00e9cdefghijklmnopqrs".encode(), "has a byte that is not ASCII text at offset 2 (0xc3)"),
        (b"two words-in-the-token\n", "has a space or control character at offset 3 (0x20)"),
        (b"short\n", "has 5 characters"),
        (b"\n\n", "is empty"),
    ],
)
def test_token_from_a_file_that_is_not_a_token_is_refused_naming_the_file(tmp_path, data, problem):
    theirs = tmp_path / "random.bin"
    theirs.write_bytes(data)
    result = run("--role", "agent", "--prefix", str(tmp_path / "p"), "--token-from", str(theirs))
    assert result.exit_code == 1
    assert result.output.startswith(f"labgang install: --token-from: {theirs} {problem}")
    assert "allowed: 16 to 4096 printable ASCII characters" in result.output
    assert not (tmp_path / "p").exists()
