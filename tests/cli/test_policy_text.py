"""How ``labgang queues`` and ``labgang explain`` show a queue's priority classes, per-user limits
and who is at them (launcher/cli/policy_text.py), from the QueueView fields."""

from __future__ import annotations

from typing import Any

from labgang.launcher.cli.explain import explain_job, explain_queue
from labgang.launcher.cli.format import queue_table

VISION: dict[str, Any] = {
    "name": "vision",
    "nominal": {"gpu": 8},
    "used": {"gpu": 6},
    "priority_classes": {"low": -10, "normal": 0, "high": 100},
    "default_priority_class": "normal",
    "user_limits": {"max_gpus_per_user": 4, "max_running_jobs_per_user": 2},
    "users": [
        {"user": "lab1", "gpus": 4, "running": 1, "submitted": 2, "at": ["max_gpus_per_user"]},
        {"user": "lab2", "gpus": 2, "running": 2, "submitted": 2, "at": ["max_running_jobs_per_user"]},
        {"user": "lab3", "gpus": 0, "running": 0, "submitted": 1, "at": []},
    ],
    "at_limits": {"max_gpus_per_user": ["lab1"], "max_running_jobs_per_user": ["lab2"]},
}
OPEN: dict[str, Any] = {"name": "open", "nominal": {"gpu": 2}, "priority_classes": {}, "user_limits": {}}


def test_queue_explains_classes_limits_and_who_is_at_them() -> None:
    lines = explain_queue(VISION, [VISION])
    assert (
        "Jobs of vision may use the priority classes low (-10), normal (0), high (100); without -p a job gets "
        "class normal (0). Anyone may lower their own job with -p NUMBER up to 0; a higher number or another "
        "class is for admins only." in lines
    )
    assert "Each user of vision may hold at most 4 gpu (max_gpus_per_user), 2 running jobs " in lines[-2]
    assert lines[-1] == "At a limit now: lab1 (4 of 4 gpu); lab2 (2 of 2 running jobs)."
    open_lines = explain_queue(OPEN, [OPEN])
    assert open_lines[-1] == (
        "Jobs of open get priority 0; anyone may lower their own job with -p NUMBER up to 0; "
        "only admins may give a higher one."
    )
    serving = {"name": "serving", "priority_classes": {"serving": 1000}, "default_priority_class": "serving"}
    assert "Anyone may lower their own job with -p NUMBER up to 1000;" in explain_queue(serving, [serving])[-1]


def test_job_says_where_its_user_stands() -> None:
    job = {
        "id": "7",
        "queue": "vision",
        "user": "lab1",
        "state": "pending",
        "workers": 1,
        "gpus_per_worker": 1,
        "reason": {
            "code": "user_limit",
            "message": "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 1",
        },
    }
    lines = explain_job(job, [VISION])
    assert lines[1] == (
        "It waits: user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 1 (user_limit)."
    )
    assert lines[2] == (
        "Queue vision lets each user hold at most 4 gpu, 2 running jobs; lab1 holds 4 gpu in 1 running job, "
        "2 unfinished in all and is at max_gpus_per_user."
    )
    assert explain_job({**job, "queue": "open"}, [OPEN]) == explain_job({**job, "queue": "open"}, [])


def test_queues_table_adds_the_limit_columns_only_when_a_queue_sets_one() -> None:
    table = queue_table([VISION, OPEN]).splitlines()
    assert table[0].split()[-4:] == ["PER", "USER", "AT", "LIMIT"]
    assert table[1].split()[-2:] == ["gpu=4,jobs=2", "lab1(gpu),lab2(jobs)"]
    assert table[2].split()[-2:] == ["-", "-"]
    assert "PER USER" not in queue_table([OPEN])
