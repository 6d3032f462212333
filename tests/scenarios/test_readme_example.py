"""The README's "What would my queues do?" example is real: its file gives its pasted output."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate

SECTION = "## What would my queues do? (`labgang simulate`)"


def test_readme_simulate_example_output_is_what_simulate_prints(repo_root: Path, tmp_path: Path, monkeypatch) -> None:
    readme = (repo_root / "README.md").read_text()
    assert SECTION in readme
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    toml_block = re.search(r"```toml\n(.*?)```", section, re.S)
    console = re.search(r"```console\n\$ labgang simulate (\S+)\n(.*?)```", section, re.S)
    assert toml_block is not None and console is not None, (
        "the README's simulate section lost its toml or console block"
    )
    toml = toml_block.group(1)
    name, pasted = console.group(1), console.group(2)
    (tmp_path / name).write_text(toml)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(simulate, [name])
    assert res.exit_code == 0, res.output
    assert res.output == pasted
    assert "docs/scenarios.md" in section


def test_readme_says_the_venv_python_must_be_readable_by_everyone(repo_root: Path) -> None:
    lab = (repo_root / "README.md").read_text().split("## Run it on a lab", 1)[1]
    assert "Python must be readable by every user" in lab
