"""``update``'s refusals keep the key as the user wrote it (scontrol's ``TimeLimit``)."""

from __future__ import annotations

from click.testing import CliRunner
from labgang.launcher.cli.main import cli


def test_a_bad_time_limit_names_TimeLimit_as_written(tmp_path):
    out = CliRunner().invoke(cli, ["update", "--state-dir", str(tmp_path), "30", "TimeLimit=abc"], prog_name="labgang")
    assert out.exit_code == 2
    assert out.output.startswith("labgang update: TimeLimit: 'abc' is not a time limit; allowed: "), out.output
    assert len(out.output.strip().splitlines()) == 1


class _Refusing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, job_id, body):
        from labgang.launcher.api.client import ApiError

        raise ApiError(403, f"job {job_id} belongs to alice; only its owner or an admin may update it")


def test_another_users_job_is_named_once(tmp_path, monkeypatch):
    from labgang.launcher.cli import verbs

    monkeypatch.setattr(verbs.Client, "for_state_dir", classmethod(lambda cls, state_dir: _Refusing()))
    out = CliRunner().invoke(cli, ["update", "--state-dir", str(tmp_path), "30", "TimeLimit=600"], prog_name="labgang")
    assert out.exit_code == 1
    assert "job 30 belongs to alice" in out.output
    assert out.output.count("job 30") == 1, out.output
