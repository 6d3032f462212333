"""A labgang every user can run (issue 24): ``labgang install --print`` warns when a unit's ``User=``
cannot run its ``ExecStart=``, ``--venv`` refuses an interpreter other users cannot run, and the access
check agrees with the kernel when a real other user tries (``lab_users``)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli import system_venv
from labgang.launcher.cli.install import install
from labgang.launcher.cli.install_access import Identity, run_problem
from unix_users import UserShell

SYSTEM_PYTHON = Path("/usr/bin/python3")


def tool(folder: Path, interpreter: Path) -> Path:
    """An executable ``#!`` script under ``folder`` (0755) run by ``interpreter``, as a venv's ``bin/labgang``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "labgang"
    script.write_text(f"#!{interpreter}\nprint('ran')\n")
    script.chmod(0o755)
    return script


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may search: tmp_path's parents are not (pytest makes them 0700)."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"lgshare-{os.getpid()}-{os.urandom(3).hex()}"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def private_python(shared: Path) -> Path:
    """A link to the system Python inside a 0700 directory: how a venv from a pyenv under /root looks."""
    private = shared / "private"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(SYSTEM_PYTHON)
    return private / "python3"


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is missing")
def test_a_script_whose_interpreter_sits_in_a_private_directory_cannot_be_run_by_others(shared: Path) -> None:
    hidden = tool(shared / "venv-a" / "bin", private_python(shared))
    problem = run_problem(hidden, Identity.anyone())
    assert problem == f"{shared / 'private'} is not searchable by every user (mode 0700)", problem
    assert run_problem(hidden, Identity.of("root")) is None
    assert run_problem(tool(shared / "venv-b" / "bin", SYSTEM_PYTHON), Identity.anyone()) is None
    unreadable = tool(shared / "venv-c" / "bin", SYSTEM_PYTHON)
    unreadable.chmod(0o711)  # executable but not readable: its interpreter could not read it
    assert "cannot be read and executed by every user (mode 0711)" in (run_problem(unreadable, Identity.anyone()) or "")


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is missing")
def test_the_check_agrees_with_the_kernel_for_a_real_other_user(shared: Path, lab_users: list[UserShell]) -> None:
    shell = lab_users[0]
    hidden = tool(shared / "venv-a" / "bin", private_python(shared))
    visible = tool(shared / "venv-b" / "bin", SYSTEM_PYTHON)
    who = Identity.of(shell.user.name)
    assert (run_problem(hidden, who) is None, run_problem(visible, who) is None) == (False, True)
    with pytest.raises(PermissionError):  # exec fails: the kernel cannot reach its interpreter
        shell.run_argv([str(hidden)])
    ran = shell.run_argv([str(visible)])
    assert (ran.returncode, ran.stdout) == (0, "ran\n"), ran.stderr


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is missing")
def test_install_print_warns_when_the_coordinators_user_cannot_run_exec_start(shared: Path) -> None:
    hidden = tool(shared / "venv-a" / "bin", private_python(shared))
    result = CliRunner().invoke(install, ["--print", "--role", "coordinator", "--bin", str(hidden)])
    assert result.exit_code == 0, result.output
    warning = (
        f"labgang install: warning: labgang-coordinator.service runs as User=labgang, who cannot run "
        f"ExecStart={hidden}: {shared / 'private'} is not searchable by labgang (mode 0700)"
    )
    assert warning in result.stderr, result.stderr
    assert "--venv /opt/labgang/venv" in result.stderr
    visible = tool(shared / "venv-b" / "bin", SYSTEM_PYTHON)
    quiet = CliRunner().invoke(install, ["--print", "--role", "coordinator", "--bin", str(visible)])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr, quiet.stderr
    agent = CliRunner().invoke(install, ["--print", "--role", "agent", "--bin", str(hidden)])
    assert "warning" not in agent.stderr, agent.stderr  # the agent runs as root


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is missing")
def test_a_venv_from_a_python_others_cannot_run_is_refused_and_nothing_is_written(shared: Path) -> None:
    prefix = shared / "root"
    venv = shared / "opt" / "venv"
    args = ["--role", "all", "--prefix", str(prefix), "--venv", str(venv), "--python", str(private_python(shared))]
    result = CliRunner().invoke(install, args)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("labgang install: --python: "), lines
    assert "cannot be run by every user" in lines[0] and "/usr/bin/python3" in lines[0], lines
    assert not prefix.exists() and not venv.exists()


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is missing")
def test_install_print_with_a_venv_shows_the_venv_the_link_and_units_that_start_it(shared: Path) -> None:
    venv = shared / "opt" / "venv"
    result = CliRunner().invoke(install, ["--print", "--role", "coordinator", "--venv", str(venv)])
    assert result.exit_code == 0, result.output
    assert f"# would run: {SYSTEM_PYTHON} -m venv {venv}" in result.stdout
    assert f"# would link: /usr/local/bin/labgang -> {venv}/bin/labgang" in result.stdout
    assert f"ExecStart={venv}/bin/labgang coordinator" in result.stdout
    assert not venv.exists()


def test_the_link_is_written_kept_and_never_replaced_without_force(shared: Path) -> None:
    prefix, target = shared / "root", shared / "venv" / "bin" / "labgang"
    assert system_venv.link(prefix, target, force=False) == (prefix / "usr/local/bin/labgang", "written")
    assert os.readlink(prefix / "usr/local/bin/labgang") == str(target)
    assert system_venv.link(prefix, target, force=False)[1] == "unchanged"
    other = shared / "other" / "labgang"
    with pytest.raises(system_venv.VenvError, match="exists and is not a link to"):
        system_venv.link(prefix, other, force=False)
    assert system_venv.link(prefix, other, force=True)[1] == "replaced"
    assert stat.S_ISLNK(os.lstat(prefix / "usr/local/bin/labgang").st_mode)
