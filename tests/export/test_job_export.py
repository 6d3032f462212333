"""``labgang export job -f job.toml --to kueue|slurm``: a job of groups as a JobSet Kueue admits
as one workload, or as a Slurm heterogeneous job; what does not translate is listed by --check."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from labgang.launcher.cli.main import cli

JOB = """\
colocate = [["leader", "worker"]]
[[group]]
name = "leader"
command = "python leader.py --port 29500"
env = { ROLE = "leader" }
resources = { gpus = 0 }
[[group]]
name = "worker"
ranks = 4
command = ["python", "worker.py"]
resources = { gpus = 2, topology = "nvlink", cpus = 8 }
[[group]]
name = "actor"
ranks = 2
command = "python actor.py"
resources = { mig = "1g.10gb" }
"""


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(JOB)
    return path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["export", "job", *args], prog_name="labgang")
    return result.exit_code, result.output


def test_kueue_gets_one_suspended_jobset_with_a_replicated_job_per_group(job_file: Path) -> None:
    code, out = run("-f", str(job_file), "--to", "kueue", "--name", "mpi", "-q", "lab")
    assert code == 0, out
    obj = yaml.safe_load(out)
    assert (obj["apiVersion"], obj["kind"], obj["spec"]["suspend"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet", True)
    assert obj["metadata"] == {"name": "mpi", "labels": {"kueue.x-k8s.io/queue-name": "lab"}}
    jobs = {j["name"]: j["template"]["spec"] for j in obj["spec"]["replicatedJobs"]}
    assert list(jobs) == ["leader", "worker", "actor"]
    assert [(j["parallelism"], j["completions"]) for j in jobs.values()] == [(1, 1), (4, 4), (2, 2)]
    leader, worker, actor = (j["template"]["spec"]["containers"][0] for j in jobs.values())
    assert "resources" not in leader and leader["env"] == [{"name": "ROLE", "value": "leader"}]
    assert leader["command"] == ["python", "leader.py", "--port", "29500"]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": 2, "cpu": 8}
    assert actor["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": 1}
    # colocate: leader and worker pods require each other's node
    for name in ("leader", "worker"):
        [term] = jobs[name]["template"]["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert jobs[name]["template"]["metadata"]["labels"] == term["labelSelector"]["matchLabels"]


def test_slurm_gets_one_component_per_group_and_one_srun(job_file: Path, tmp_path: Path) -> None:
    code, out = run("-f", str(job_file), "--to", "slurm", "--name", "mpi", "-q", "lab")
    assert code == 0, out
    script = out
    head, srun = script.split("\n\n", 1)
    components = head.split("#SBATCH hetjob\n")
    assert len(components) == 3
    assert "#SBATCH --ntasks=1\n" in components[0] and "--gpus-per-task" not in components[0]
    assert "#SBATCH --gpus-per-task=2\n#SBATCH --nodes=1\n#SBATCH --cpus-per-task=8\n" in components[1]
    assert "#SBATCH --gres=gpu:1g.10gb:1" in components[2]
    assert "srun --het-group=0 env ROLE=leader python leader.py --port 29500" in srun
    assert ": --het-group=1 python worker.py" in srun and ": --het-group=2 python actor.py" in srun
    path = tmp_path / "hetjob.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0  # a valid script


def test_check_lists_what_does_not_translate(job_file: Path) -> None:
    code, out = run("-f", str(job_file), "--to", "slurm", "--check", "--json")
    assert code == 0, out
    gaps = {g["field"]: g for g in json.loads(out)["does_not_translate"]}
    assert set(gaps) == {"colocate", "group[1] (worker).resources.topology"}
    assert "different nodes" in gaps["colocate"]["nearest"]


def test_a_bad_job_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'b'\nresources = { gpus = 'two' }\n")
    code, out = run("-f", str(path), "--to", "kueue")
    assert code == 2 and out.count("\n") == 1
    assert "group[1].resources.gpus: 'two'; allowed: a whole number >= 0" in out
