"""The ``--dependency`` grammar and the verdict on one dependency (no model, no coordinator)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from labgang.launcher.lifecycle.dependency import (
    MAX_DELAY_MINUTES,
    BadDependency,
    Condition,
    Dependency,
    DependencyKind,
    Outcome,
    Target,
    judge,
    judge_condition,
    matches,
    parse_dependency,
    targets_of,
)
from labgang.launcher.lifecycle.states import JobState

OK, NOTOK, ANY, AFTER = DependencyKind.AFTEROK, DependencyKind.AFTERNOTOK, DependencyKind.AFTERANY, DependencyKind.AFTER


@pytest.mark.parametrize(
    ("text", "conditions", "any_of", "canonical"),
    [
        ("afterok:12", [(OK, "12")], False, "afterok:12"),
        ("afterok:12:13", [(OK, "12"), (OK, "13")], False, "afterok:12:13"),
        ("afterok:12,afternotok:13", [(OK, "12"), (NOTOK, "13")], False, "afterok:12,afternotok:13"),
        ("afterok:12?afterany:13", [(OK, "12"), (ANY, "13")], True, "afterok:12?afterany:13"),
        (" after:7 , singleton ", [(AFTER, "7"), (DependencyKind.SINGLETON, None)], False, "after:7,singleton"),
        ("AFTEROK:12", [(OK, "12")], False, "afterok:12"),
        ("12", [(ANY, "12")], False, "afterany:12"),
        ("afterok:12_3", [(OK, "12_3")], False, "afterok:12_3"),
        ("afterok:12,afterok:12", [(OK, "12")], False, "afterok:12"),
        ("afterok:12?afterok:13", [(OK, "12"), (OK, "13")], True, "afterok:12?afterok:13"),
        ("afterok:12:13?afterok:14", [(OK, "12"), (OK, "13"), (OK, "14")], True, "afterok:12?afterok:13?afterok:14"),
        ("afterok:12?afterok:12", [(OK, "12")], False, "afterok:12"),
        ("afterok:0016:012_03", [(OK, "16"), (OK, "12_3")], False, "afterok:16:12_3"),
    ],
    ids=[
        "one",
        "two-ids",
        "all-of",
        "any-of",
        "spaces-singleton",
        "case",
        "bare-id",
        "array-task",
        "repeat",
        "any-of-one-type",
        "any-of-id-list",
        "any-of-repeat",
        "leading-zeros",
    ],
)
def test_parse(text: str, conditions: list[tuple[DependencyKind, str | None]], any_of: bool, canonical: str) -> None:
    dep = parse_dependency(text)
    assert dep.conditions == tuple(Condition(k, i) for k, i in conditions)
    assert dep.any_of is any_of
    assert dep.text == canonical
    assert parse_dependency(dep.text) == dep


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("", "must not be empty"),
        (
            "afterfoo:12",
            "'afterfoo' is not a dependency type; allowed: after, afterany, afterok, afternotok, aftercorr, singleton",
        ),
        ("afterok", "'afterok': afterok needs at least one job id"),
        ("afterok:", "'afterok:': '' is not a job id"),
        ("afterok:x1", "'afterok:x1': 'x1' is not a job id"),
        ("afterok:0", "'0' is not a job id"),
        ("afterok:12,afterany:13?after:14", "mixes ',' (all of) and '?' (any of)"),
        ("afterok:12,,afterok:13", "an empty condition"),
        ("singleton:12", "'singleton:12': singleton takes no job id"),
        ("afterok:12+5", "'afterok:12+5': a delay after a job ('12+5') is only for after, as in Slurm"),
        ("after:12+x", "'after:12+x': 'x' is not a number of minutes; allowed: after:ID+MINUTES"),
        ("expand:12", "'expand:12': 'expand' is a Slurm dependency type labgang does not support; allowed: after,"),
        ("aftercorr:12_3", "'aftercorr:12_3': aftercorr names a job array, not one task ('12_3')"),
        ("afterok:0", "'0' is not a job id"),
        ("afterok:00", "'00' is not a job id"),
    ],
)
def test_a_bad_dependency_names_the_part_that_is_wrong(text: str, names: str) -> None:
    with pytest.raises(BadDependency) as caught:
        parse_dependency(text)
    message = str(caught.value)
    assert message.startswith("dependency: ") and "\n" not in message
    assert names in message


def test_an_array_id_covers_its_tasks_and_nothing_else() -> None:
    assert matches("12", "12") and matches("12", "12_0") and matches("12", "12_99")
    assert not matches("12", "123") and not matches("12", "1") and not matches("12_1", "12_10")
    assert targets_of("12_3") == ("12_3", "12") and targets_of("12") == ("12",)


def t(job_id: str, state: JobState, started: bool = False) -> Target:
    return Target(job_id, state, started or state in (JobState.RUNNING, JobState.SUCCEEDED))


S, F, C, P, R = JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PENDING, JobState.RUNNING


@pytest.mark.parametrize(
    ("kind", "state", "started", "outcome"),
    [
        (OK, S, True, Outcome.MET),
        (OK, F, True, Outcome.NEVER),
        (OK, C, False, Outcome.NEVER),
        (OK, R, True, Outcome.WAITING),
        (NOTOK, F, True, Outcome.MET),
        (NOTOK, C, False, Outcome.MET),
        (NOTOK, S, True, Outcome.NEVER),
        (NOTOK, P, False, Outcome.WAITING),
        (ANY, F, True, Outcome.MET),
        (ANY, S, True, Outcome.MET),
        (ANY, R, True, Outcome.WAITING),
        (AFTER, R, True, Outcome.MET),
        (AFTER, P, False, Outcome.WAITING),
        (AFTER, P, True, Outcome.MET),  # requeued after it ran: it did start
        (AFTER, C, False, Outcome.MET),  # Slurm: after = started or cancelled
    ],
)
def test_one_job_against_each_kind(kind: DependencyKind, state: JobState, started: bool, outcome: Outcome) -> None:
    assert judge_condition(Condition(kind, "5"), [Target("5", state, started)]) == (outcome, state.value)


def test_an_array_holds_once_every_task_does() -> None:
    tasks = [t("9_0", S), t("9_1", R), t("9_2", P)]
    assert judge_condition(Condition(OK, "9"), tasks) == (Outcome.WAITING, "1 of 3 tasks finished")
    assert judge_condition(Condition(AFTER, "9"), tasks) == (Outcome.WAITING, "2 of 3 tasks started")
    done = [t("9_0", S), t("9_1", S), t("9_2", S)]
    assert judge_condition(Condition(OK, "9"), done) == (Outcome.MET, "all 3 tasks finished")
    assert judge_condition(Condition(NOTOK, "9"), done) == (Outcome.NEVER, "all 3 tasks succeeded")
    one_failed = [t("9_0", S), t("9_1", F), t("9_2", R)]
    assert judge_condition(Condition(OK, "9"), one_failed) == (Outcome.NEVER, "task 9_1 failed")
    assert judge_condition(Condition(NOTOK, "9"), one_failed) == (Outcome.WAITING, "2 of 3 tasks finished")
    assert judge_condition(Condition(NOTOK, "9"), [*one_failed[:2], t("9_2", S)]) == (Outcome.MET, "task 9_1 failed")


def test_an_unknown_job_never_holds() -> None:
    assert judge_condition(Condition(ANY, "77"), []) == (Outcome.NEVER, "no such job")


def test_all_of_waits_for_every_condition_and_fails_on_the_first_that_cannot_hold() -> None:
    dep = parse_dependency("afterok:1,afterany:2")
    running = {"1": [t("1", R)], "2": [t("2", P)]}
    verdict = judge(dep, running, None)
    assert (verdict.outcome, verdict.message) == (
        Outcome.WAITING,
        "waits for afterok:1 (running), afterany:2 (pending)",
    )
    half = {"1": [t("1", S)], "2": [t("2", P)]}
    assert judge(dep, half, None).message == "waits for afterany:2 (pending)"
    failed = {"1": [t("1", F)], "2": [t("2", P)]}
    verdict = judge(dep, failed, None)
    assert (verdict.outcome, verdict.message) == (Outcome.NEVER, "afterok:1 can never be satisfied (failed)")
    assert judge(dep, {"1": [t("1", S)], "2": [t("2", F)]}, None).outcome == Outcome.MET


def test_any_of_holds_on_the_first_and_fails_only_when_none_can() -> None:
    dep = parse_dependency("afterok:1?afterok:2")
    assert judge(dep, {"1": [t("1", F)], "2": [t("2", R)]}, None).message == "waits for afterok:2 (running)"
    assert judge(dep, {"1": [t("1", F)], "2": [t("2", S)]}, None).outcome == Outcome.MET
    verdict = judge(dep, {"1": [t("1", F)], "2": [t("2", C)]}, None)
    assert (verdict.outcome, verdict.message) == (
        Outcome.NEVER,
        "none of afterok:1 (failed), afterok:2 (cancelled) can be satisfied",
    )


def test_singleton_waits_for_the_holder_and_met_before_judges_only_singleton() -> None:
    dep = parse_dependency("afterok:1,singleton")
    verdict = judge(dep, {"1": [t("1", S)]}, "job 4 of the same name is running")
    assert verdict.message == "waits for singleton (job 4 of the same name is running)"
    assert judge(dep, {}, None, met_before=True).outcome == Outcome.MET
    assert judge(dep, {}, "job 4 of the same name is running", met_before=True).outcome == Outcome.WAITING


_ids = st.builds(
    lambda job, task: str(job) if task is None else f"{job}_{task}",
    st.integers(1, 10**6),
    st.none() | st.integers(0, 10**4),
)
_conditions = st.one_of(
    st.builds(Condition, st.sampled_from([OK, NOTOK, ANY, AFTER]), _ids),
    st.just(Condition(DependencyKind.SINGLETON)),
)


@given(st.lists(_conditions, min_size=1, max_size=8), st.booleans())
def test_the_canonical_text_parses_back_to_the_same_dependency(conditions: list[Condition], any_of: bool) -> None:
    dep = Dependency(tuple(conditions), any_of)
    assert parse_dependency(dep.text) == dep
    assert parse_dependency(dep.text).text == dep.text
    assert dep.any_of == (any_of and len(set(conditions)) > 1)


def _spelled_id(job: int, task: int | None, zeros: int) -> str:
    return "0" * zeros + (str(job) if task is None else f"{job}_{task}")


_typed_ids = st.builds(_spelled_id, st.integers(1, 10**9), st.none() | st.integers(0, 10**4), st.integers(0, 2))
_typed_delays = st.builds(
    lambda minutes, zeros: "" if minutes is None else "+" + "0" * zeros + str(minutes),
    st.none() | st.integers(0, MAX_DELAY_MINUTES) | st.sampled_from([10**6, 10**6 + 1, MAX_DELAY_MINUTES]),
    st.integers(0, 2),
)
_typed_parts = st.one_of(
    st.builds(
        lambda kind, ids: f"{kind}:{':'.join(ids)}",
        st.sampled_from(["afterok", "AfterNotOk", "afterany"]),
        st.lists(_typed_ids, min_size=1, max_size=3),
    ),
    st.builds(
        lambda ids: "after:" + ":".join(i + d for i, d in ids),
        st.lists(st.tuples(_typed_ids, _typed_delays), min_size=1, max_size=3),
    ),
    _typed_ids,
    st.just("singleton"),
)


@given(st.lists(_typed_parts, min_size=1, max_size=5), st.sampled_from([",", "?"]))
def test_every_text_the_grammar_accepts_spells_back_to_itself(parts: list[str], separator: str) -> None:
    """Typed texts (delays up to the bound, leading zeros, either separator) and not only
    Dependency objects: what parses must print as text that parses to the same dependency."""
    dep = parse_dependency(separator.join(parts))
    assert "e" not in dep.text.replace("singleton", "").replace("after", "")
    assert parse_dependency(dep.text) == dep
    assert parse_dependency(dep.text).text == dep.text


def test_a_delay_of_a_million_minutes_is_spelled_in_digits() -> None:
    dep = parse_dependency("after:6+1000000")
    assert dep.text == "after:6+1000000"
    assert dep.conditions[0].delay_s == 60_000_000
    assert parse_dependency(f"after:3+{MAX_DELAY_MINUTES}").text == f"after:3+{MAX_DELAY_MINUTES}"


@pytest.mark.parametrize("minutes", [str(MAX_DELAY_MINUTES + 1), "1000000000", "9" * 5000])
def test_a_delay_past_ten_years_is_refused_with_the_range(minutes: str) -> None:
    with pytest.raises(BadDependency) as err:
        parse_dependency(f"after:3+{minutes}")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("dependency: ")
    assert "out of range; allowed: after:ID+MINUTES with 0 to 5,256,000 minutes (3650 days)" in message
