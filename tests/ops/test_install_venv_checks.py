"""``labgang install --venv``'s checks and texts, without building a venv (tests/ops/test_installed_launcher.py
builds one): the launcher's text and what it refuses, a source that is not a checkout, where the units are
found without one, and what ``--print`` says it would do."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli import install as install_module
from labgang.launcher.cli import install_launcher, system_venv
from labgang.launcher.cli.install import install

REPO = Path(__file__).resolve().parents[2]


def test_the_launcher_starts_without_site_and_sets_up_exactly_the_venv(tmp_path):
    venv = tmp_path / "venv"
    folders = [f"{venv}/lib/python3.11/site-packages"]
    text = install_launcher.render(venv / "bin" / "python", venv, folders)
    lines = text.splitlines()
    assert lines[0] == f"#!{venv}/bin/python -IS"
    compile(text, "labgang", "exec")  # valid Python
    assert f'    sys.prefix = sys.exec_prefix = "{venv}"' in lines  # double quotes, as docs/cli-startup.md shows
    assert f'    sys.path.extend(["{folders[0]}"])' in lines
    assert lines[-1] == "main()" and "from labgang.launcher.cli.quick_launch import main" in lines


def test_the_launcher_run_with_site_leaves_sys_path_alone(tmp_path):
    # Run with site (the full path), the file is pip's script: its two set-up lines are skipped.
    text = install_launcher.render(Path(sys.executable), tmp_path, ["/nonexistent/site-packages"])
    script = tmp_path / "labgang"
    script.write_text(text.replace("from labgang.launcher.cli.quick_launch import main\n\nmain()\n", ""))
    probe = "import runpy, sys; runpy.run_path(sys.argv[1]); print(sys.prefix, '/nonexistent' in str(sys.path))"
    done = subprocess.run([sys.executable, "-c", probe, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [sys.prefix, "False"]


def test_a_shebang_line_linux_would_cut_or_split_is_refused():
    long = Path("/opt/" + "v" * 120 + "/bin/python")
    with pytest.raises(install_launcher.LauncherError, match="over 127"):
        install_launcher.render(long, long.parent.parent, [])
    with pytest.raises(install_launcher.LauncherError, match="whitespace"):
        install_launcher.render(Path("/opt/lab gang/bin/python"), Path("/opt/lab gang"), [])


def test_a_venv_needs_a_source_checkout(tmp_path):
    with pytest.raises(system_venv.VenvError, match="is not a labgang source checkout"):
        system_venv.check_shareable(Path("/usr/bin/python3"), tmp_path)


def test_steps_make_a_regular_install_not_an_editable_one(tmp_path):
    venv, source = tmp_path / "venv", tmp_path / "src"
    assert system_venv.steps(Path("/usr/bin/python3"), venv, source) == [
        ["/usr/bin/python3", "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
    ]


def test_print_says_the_install_is_regular_and_built_from_a_copy(tmp_path):
    venv = tmp_path / "venv"
    result = CliRunner().invoke(install, ["--print", "--role", "agent", "--venv", str(venv)])
    assert result.exit_code == 0, result.output
    assert f"# would run: {venv}/bin/python -m pip install --quiet {REPO}" in result.stdout
    assert "a regular install, built from a temporary copy" in result.stdout
    assert " -e " not in result.stdout
    assert not venv.exists()


def test_without_a_checkout_the_units_come_from_the_installs_data_files(tmp_path, monkeypatch):
    fake = tmp_path / "site-packages" / "labgang" / "launcher"
    fake.mkdir(parents=True)
    monkeypatch.setattr("labgang.launcher.__file__", str(fake / "__init__.py"))
    data = tmp_path / "prefix"
    monkeypatch.setattr("sysconfig.get_path", lambda name, *a: str(data) if name == "data" else "")
    monkeypatch.setattr("site.getuserbase", lambda: str(tmp_path / "userbase"))
    with pytest.raises(install_module.InstallError, match="unit files not found under"):
        install_module.source_root()
    shutil.copytree(REPO / "systemd", data / "share/labgang/systemd")
    assert install_module.source_root() == data / "share/labgang"


def test_a_source_that_is_not_a_checkout_is_refused_and_nothing_is_written(tmp_path):
    venv = tmp_path / "venv"
    result = CliRunner().invoke(install, ["--venv", str(venv), "--source", str(tmp_path), "--prefix", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == (
        f"labgang install: --source: {tmp_path} is not a labgang checkout (no systemd/labgang-agent.service)"
    )
    assert sorted(tmp_path.iterdir()) == []


def test_a_regular_install_carries_every_file_of_config_and_examples(monkeypatch):
    """README: the venv "carries the units, every file of config/ and examples/ under share/labgang", so
    ``up --simulate <venv>/share/labgang/config/sim/h100x8.toml`` works without a checkout."""
    import runpy

    setuptools = pytest.importorskip("setuptools")  # setup.py's own import, not a real install
    seen: dict[str, object] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: seen.update(kwargs))
    monkeypatch.chdir(REPO)
    runpy.run_path(str(REPO / "setup.py"))
    carried = {f"{folder}/{Path(f).name}" for folder, files in seen["data_files"] for f in files}
    for tree in ("config", "examples", "systemd"):
        on_disk = {
            f"share/labgang/{p.relative_to(REPO).as_posix()}"
            for p in (REPO / tree).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        }
        assert on_disk and on_disk <= carried, sorted(on_disk - carried)
    assert "share/labgang/config/sim/h100x8.toml" in carried
    assert "share/labgang/examples/ddp_allreduce.py" in carried
