"""The job-array spec parser (Slurm's ``--array`` syntax), folding and the task environment."""

from __future__ import annotations

import pytest
from labgang.launcher.arrays import (
    ArraySpec,
    BadArraySpec,
    fold,
    parse_array,
    split_task_id,
    step_of,
    task_environment,
)


@pytest.mark.parametrize(
    ("text", "indices", "limit"),
    [
        ("0-99", tuple(range(100)), None),
        ("1,3,5-9", (1, 3, 5, 6, 7, 8, 9), None),
        ("0-20:4", (0, 4, 8, 12, 16, 20), None),
        ("0-21:4", (0, 4, 8, 12, 16, 20), None),
        ("0-99%8", tuple(range(100)), 8),
        ("7", (7,), None),
        (" 3,1,2,3 ", (1, 2, 3), None),  # sorted; each index once
        ("0-3,2-5%1", tuple(range(6)), 1),
        ("5-5", (5,), None),
    ],
)
def test_parses_slurm_syntax(text: str, indices: tuple[int, ...], limit: int | None) -> None:
    assert parse_array(text) == ArraySpec(indices, limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5-2", '"5-2": end below start'),
        ("0,5-2", '"5-2": end below start'),
        ("0-10:0", '"0-10:0": step must be a whole number >= 1'),
        ("0-20:-4", '"0-20:-4": step must be a whole number >= 1'),
        ("0-20:x", '"0-20:x": step must be a whole number >= 1'),
        ("0-20:", '"0-20:": step must be a whole number >= 1'),
        ("3:2", '"3:2": a step needs a range (start-end:step)'),
        ("a-3", "\"a-3\": start 'a' is not a whole number >= 0"),
        ("-3", '"-3": the start is missing'),
        ("1-", '"1-": the end is missing'),
        ("1,,2", '"1,,2": an empty part between commas'),
        ("0-9%0", '"%0": the cap must be a whole number >= 1'),
        ("0-9%x", '"%x": the cap must be a whole number >= 1'),
        ("0-9%1000002", '"%1000002": the cap is over 1000001, more tasks than an array may have; allowed: a whole'),
        ("0-9%99999999999999999999", '"%99999999999999999999": the cap is over 1000001'),  # not stored, ever
        ("0-9%" + "9" * 5000, '"%999'),  # longer than int() reads: the same one line, not int's own error
        ("%4", '"%4": no indices before the %'),
        ("", "empty; allowed:"),
        ("1.5", "\"1.5\": index '1.5' is not a whole number >= 0"),
    ],
)
def test_a_bad_spec_names_the_part_that_is_wrong(text: str, message: str) -> None:
    with pytest.raises(BadArraySpec) as info:
        parse_array(text)
    assert str(info.value).startswith(message)


def test_the_cli_names_the_flag_once_with_the_same_step_message_for_zero_and_negative() -> None:
    from labgang.launcher.cli.job_request import SubmissionError, build_submission

    for step in ("0", "-4"):
        with pytest.raises(SubmissionError) as info:
            build_submission(argv=["x"], env={}, cwd="/", array=f"0-20:{step}")
        assert str(info.value) == f'--array: "0-20:{step}": step must be a whole number >= 1'


def test_max_size_bounds_every_index_as_slurms_max_array_size() -> None:
    assert parse_array("0-9", max_size=10).indices == tuple(range(10))
    with pytest.raises(BadArraySpec, match=r'^"0-10": index 10 is over the largest allowed, 9'):
        parse_array("0-10", max_size=10)
    with pytest.raises(BadArraySpec, match=r'^"12": index 12 is over'):
        parse_array("1,12", max_size=10)


def test_fold_prints_runs_as_ranges() -> None:
    assert fold([1, 3, 5, 6, 7, 8, 9]) == "1,3,5-9"
    assert fold([9, 8, 0]) == "0,8-9"
    assert fold([4]) == "4"
    assert fold([]) == ""


def test_fold_prints_evenly_spaced_runs_of_three_or_more_with_their_step_as_slurm_does() -> None:
    assert fold(parse_array("0-20:4").indices) == "0-20:4"
    assert fold([0, 4]) == "0,4"  # two members: no step
    assert fold([0, 4, 8, 9, 10, 30, 40]) == "0,4,8-10,30,40"
    assert fold([0, 4, 8, 10, 30, 40, 50]) == "0-8:4,10,30-50:10"
    assert fold([1, 3, 5, 7, 8, 9]) == "1-5:2,7-9"  # a consecutive run keeps its members
    for spec in ("0-20:4", "1,3,5-9", "0-99:3,200-210", "2,4,6,7,8,100"):
        assert parse_array(fold(parse_array(spec).indices)).indices == parse_array(spec).indices


def test_task_ids_and_steps() -> None:
    assert split_task_id("12_7") == ("12", 7)
    assert split_task_id("12") is None and split_task_id("x_1") is None and split_task_id("12_") is None
    assert step_of((0, 4, 8)) == 4 and step_of((1, 3, 4)) == 1 and step_of((5,)) == 1


def test_task_environment_has_labgangs_and_slurms_names() -> None:
    env = task_environment("12", 8, 6, 0, 20, 4)
    assert env["LABGANG_ARRAY_JOB_ID"] == env["SLURM_ARRAY_JOB_ID"] == "12"
    assert env["LABGANG_ARRAY_TASK_ID"] == env["SLURM_ARRAY_TASK_ID"] == "8"
    assert env["SLURM_ARRAY_TASK_COUNT"] == "6"
    assert (env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"], env["SLURM_ARRAY_TASK_STEP"]) == ("0", "20", "4")
    assert len(env) == 12


def test_queue_shows_pending_stepped_tasks_as_slurm_does() -> None:
    from labgang.launcher.jobtable import job_table

    jobs = [{"id": f"18_{i}", "array_id": "18", "array_index": i, "state": "pending"} for i in range(0, 21, 4)]
    [_, row] = job_table(jobs, now=0.0).splitlines()
    assert row.split()[0] == "18_[0-20:4]"


def test_one_fold_rule_keeps_the_first_row_of_each_key_for_all_its_pending_tasks() -> None:
    """``fold_pending_tasks`` is the one rule ``labgang queue`` (jobtable.render) and ``labgang top``
    (tui/rows.job_rows) fold an array's pending tasks by: the first row of a key stands for its tasks,
    with the cap of that row; a key of one task keeps its own id; other rows stay as they are."""
    from labgang.launcher.jobtable import fold_pending_tasks

    # rows: 0 7_2, 1 another job, 2 7_0, 3 9_1, 4 7_1 moved to another queue, 5 7_3
    tasks = [
        (0, ("7", "q"), "7", 2, 4),
        (2, ("7", "q"), "7", 0, None),  # its cap is not the first row's: the first row's counts
        (3, ("9", "q"), "9", 1, None),
        (4, ("7", "moved"), "7", 1, 4),  # another queue: its own key, its own row
        (5, ("7", "q"), "7", 3, 4),
    ]
    assert fold_pending_tasks(tasks) == {0: "7_[0,2-3%4]", 2: None, 5: None}
    assert fold_pending_tasks(iter(tasks[2:4])) == {}
    assert fold_pending_tasks([]) == {}


def test_the_client_refuses_an_array_over_any_clusters_ceiling_before_building_it() -> None:
    """A typo such as ``0-99999999`` is refused by the CLI at once (the ceiling of ``max_array_size``),
    not after building a hundred million indices in memory."""
    from labgang.launcher.arrays import ARRAY_SIZE_CEILING
    from labgang.launcher.cli.job_request import SubmissionError, build_submission
    from labgang.launcher.config.limits import LimitsConfig

    assert LimitsConfig.model_fields["max_array_size"].metadata[-1].le == ARRAY_SIZE_CEILING
    with pytest.raises(SubmissionError, match=r"^--array: \"0-99999999\": index 99999999 is over the largest"):
        build_submission(argv=["true"], array="0-99999999", env={}, cwd="/")


def test_a_task_that_differs_from_its_array_keeps_its_own_row_in_queue():
    """A new user's finding: ``update 44_2 Partition=scratch`` (or a new name or priority on one task)
    left ``queue`` showing ``44_[0-3] ... vision``: the moved task was folded into its array's row,
    which showed the first task's queue. Tasks fold only while their rows say the same."""
    from labgang.launcher.jobtable import job_table

    def task(index: int, **more):
        return {"id": f"44_{index}", "array_id": 44, "array_index": index, "name": "sleep", "user": "alice",
                "queue": "vision", "state": "pending", "workers": 1, "gpus_per_worker": 1, "priority": 0,
                "submit_time": 0.0, **more}  # fmt: skip

    same = job_table([task(i) for i in range(4)], 10.0).splitlines()
    assert [line.split()[0] for line in same[1:]] == ["44_[0-3]"]
    moved = [task(0), task(1), task(2, queue="scratch"), task(3, name="other", priority=-5)]
    rows = [line.split() for line in job_table(moved, 10.0).splitlines()[1:]]
    assert [(r[0], r[1], r[3], r[6]) for r in rows] == [
        ("44_[0-1]", "sleep", "vision", "0"),
        ("44_2", "sleep", "scratch", "0"),
        ("44_3", "other", "vision", "-5"),
    ]
