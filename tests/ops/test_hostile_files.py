"""Config and machine files that used to crash a command with a traceback (a TOML array nested
1,000 deep, ``model = false``, ``power_w = inf``) get one line naming the key, wherever they
are read: ``config check``, the coordinator's and the agent's config loaders, ``--simulate``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.agent.config import AgentConfigError, load_agent_config
from labgang.agent.nvml import open_backend
from labgang.agent.tomlfile import TomlFileError, read_toml
from labgang.launcher.cli.config import config
from labgang.launcher.config.cluster import ConfigError, load_config

DEEP = "[" * 1000 + "]" * 1000
MACHINE = '[machine]\nhostname = "x"\n'
GPU = '[[gpu]]\nmodel = "H100-SXM5-80GB"\n'

BAD_MACHINES = [
    (MACHINE + "[[gpu]]\nmodel = false\n", "gpu[0].model: must be a string"),
    ("gpu = 5\n" + MACHINE, "gpu: must be an array of tables"),
    ("gpu = [5]\n" + MACHINE, "gpu[0]: must be a table"),
    (MACHINE + GPU + "power_w = inf\n", "gpu[0].power_w: inf and nan are not allowed"),
    (MACHINE + GPU + "power_w = nan\n", "gpu[0].power_w: inf and nan are not allowed"),
    (MACHINE + GPU + "power_w = true\n", "gpu[0].power_w: must be"),
    (MACHINE + GPU + "sm_count = 1e300\n", "gpu[0].sm_count: must be an integer"),
    (MACHINE + GPU + "memory_total_mib = -1\n", "gpu[0].memory_total_mib: must be"),
    (MACHINE + GPU + "power_w = " + DEEP + "\n", "nested too deeply"),
]
IDS = ["model-false", "gpu-5", "gpu-list-of-5", "power-inf", "power-nan", "power-bool", "sm-float", "mem-neg", "deep"]


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    return " ".join(lines)


@pytest.mark.parametrize("text, message", BAD_MACHINES, ids=IDS)
def test_config_check_names_the_key_of_a_bad_machine_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(text)
    res = CliRunner().invoke(config, ["check", str(path)])
    assert res.exit_code == 2, res.output
    assert message in one_line(res.output), res.output


@pytest.mark.parametrize("text, message", BAD_MACHINES, ids=IDS)
def test_simulate_names_the_key_of_a_bad_machine_file(tmp_path: Path, text: str, message: str) -> None:
    """``--simulate`` (``labgang up``, ``labgang agent``, ``nodes --local``) goes through ``open_backend``."""
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        open_backend(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_good_machine_file_checks_ok(repo_root: Path) -> None:
    path = repo_root / "config" / "sim" / "h100x8.toml"
    res = CliRunner().invoke(config, ["check", str(path)])
    assert res.exit_code == 0, res.output
    assert "machine file ok" in res.output and "8 GPU(s)" in res.output


@pytest.mark.parametrize(
    "text, message",
    [
        ("a = " + DEEP + "\n", "not valid TOML: arrays or tables nested too deeply"),
        ('[[queues]]\nname = "q"\nstarvation_after = inf\n', "queues[0].starvation_after: inf and nan are not allowed"),
        ("node_timeout_s = nan\n", "node_timeout_s: inf and nan are not allowed"),
    ],
    ids=["deep", "inf", "nan"],
)
def test_every_config_reader_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(TomlFileError) as caught:
        read_toml(path)
    assert str(caught.value) == f"{path}: {message}" or message in str(caught.value)
    with pytest.raises(ConfigError) as cluster:  # the coordinator's loader
        load_config(path)
    assert message in str(cluster.value) and "\n" not in str(cluster.value)
    with pytest.raises(AgentConfigError) as agent:  # the agent's loader
        load_agent_config(path)
    assert message in str(agent.value) and "\n" not in str(agent.value)
    res = CliRunner().invoke(config, ["check", "--kind", "cluster", str(path)])
    assert res.exit_code == 2 and message in one_line(res.output), res.output
