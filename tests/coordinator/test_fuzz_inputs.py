"""Property tests over the job spec and the config schemas: whatever a client or a file holds,
the answer is a valid object or one error line naming what is wrong; never a traceback, never
a value that fails later (a non-finite number, a NUL byte, an oversized field)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from labgang.agent.nvml.machine import machine_from_toml
from labgang.agent.tomlfile import TomlTextError, loads_toml
from labgang.launcher.api import jsoncodec
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, LimitsConfig, parse_config
from labgang.launcher.coordinator.errors import ApiError
from labgang.launcher.coordinator.requests import Caller, SubmitBody, build_spec

FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
CALLER = Caller(uid=1000, user="alice")
CONFIG = parse_config(
    {
        "priority_classes": {"high": 10},
        "limits": {"max_argv_bytes": 2048, "max_env_bytes": 2048, "max_name_chars": 20, "max_cwd_bytes": 64},
        "queues": [{"name": "default", "nominal": {"gpu": 8, "mig-1g.10gb": 7}}],
    }
)

# Text that includes what breaks execve and JSON: NUL, lone surrogates, long runs.
texts = st.text(alphabet=st.characters(codec=None), max_size=40) | st.sampled_from(
    ["", "\0", "\ud800", "a\udc80b", "x" * 3000, "SIGUSR1@60", "USR1@inf", "USR1@nan", "1g.10gb", "/tmp", "high"]
)
numbers = st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True)
scalars = st.none() | st.booleans() | numbers | texts
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12
)
fields = sorted(SubmitBody.model_fields)
field_values = {
    "argv": st.lists(texts, max_size=5) | json_values,
    "env": st.dictionaries(texts, texts, max_size=4) | json_values,
}
bodies = st.fixed_dictionaries(
    {},
    optional={**{k: field_values.get(k, json_values) for k in fields}, "unknown_field": json_values},
)


def one_line(message: str) -> None:
    assert message and "\n" not in message and "Traceback" not in message


@FUZZ
@given(bodies)
def test_a_submission_is_a_valid_spec_or_one_line_naming_the_field(body: dict[str, Any]) -> None:
    try:
        spec = build_spec(body, CALLER, CONFIG)
    except ApiError as exc:
        one_line(exc.message)
        if exc.field is not None:
            assert exc.field.split(".")[0] in (*fields, "unknown_field") or exc.field == "unknown_field"
        return
    # accepted: nothing in it can fail at launch or break a listing
    jsoncodec.dumps({"time_limit_s": spec.time_limit_s, "grace_s": spec.grace_s, "argv": spec.argv, "env": spec.env})
    for text in [*spec.argv, *spec.env, *spec.env.values(), spec.cwd, spec.name]:
        assert "\0" not in text
        text.encode("utf-8")
    assert sum(len(a.encode()) + 1 for a in spec.argv) <= CONFIG.limits.max_argv_bytes
    assert len(spec.name) <= CONFIG.limits.max_name_chars and len(spec.cwd.encode()) <= CONFIG.limits.max_cwd_bytes
    assert spec.time_limit_s is None or (math.isfinite(spec.time_limit_s) and spec.time_limit_s > 0)
    assert math.isfinite(spec.grace_s)


@FUZZ
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_a_request_body_parses_or_is_one_value_error(raw: bytes) -> None:
    try:
        jsoncodec.loads(raw)
    except ValueError as exc:
        one_line(str(exc))


config_keys = sorted(ClusterConfig.model_fields)
limit_keys = sorted(LimitsConfig.model_fields)
queue_tables = st.dictionaries(
    st.sampled_from(["name", "nominal", "cohort", "within_queue", "starvation_after", "users", "lending_limit"]),
    json_values,
    max_size=5,
)
configs = st.fixed_dictionaries(
    {"queues": st.lists(queue_tables, max_size=3) | json_values},
    optional={
        **{k: json_values for k in config_keys if k not in ("queues", "limits")},
        "limits": st.dictionaries(st.sampled_from(limit_keys), json_values, max_size=4) | json_values,
    },
)


@FUZZ
@given(configs)
def test_a_cluster_config_is_valid_or_one_line_per_problem(data: dict[str, Any]) -> None:
    try:
        config = parse_config(data)
    except ConfigError as exc:
        assert exc.problems
        for problem in exc.problems:
            one_line(problem)
        return
    assert config.queues
    for value in (config.node_timeout_s, config.default_grace_s, config.max_signal_lead_s):
        assert math.isfinite(value)


toml_values = st.sampled_from(
    ["1", "-1", "1.5", "inf", "nan", "-inf", "true", "false", '"x"', '""', "[]", "[1, 2]", "[[1]]", "{}", "1e999"]
) | st.integers(1, 1200).map(lambda n: "[" * n + "]" * n)
gpu_keys = st.sampled_from(["model", "power_w", "memory_total_mib", "sm_count", "mig_current", "processes", "name"])


@FUZZ
@given(st.lists(st.tuples(gpu_keys, toml_values), max_size=5), st.booleans())
def test_a_machine_file_loads_or_is_one_line_naming_the_key(pairs: list[tuple[str, str]], with_model: bool) -> None:
    lines = ["[machine]", 'hostname = "fuzz"', "[[gpu]]"]
    if with_model:
        lines.append('model = "H100-SXM5-80GB"')
    seen = {"model"} if with_model else set()
    for key, value in pairs:
        if key not in seen:
            seen.add(key)
            lines.append(f"{key} = {value}")
    text = "\n".join(lines) + "\n"
    try:
        machine = machine_from_toml(text, "fuzz.toml")
    except ValueError as exc:
        one_line(str(exc))
        return
    for gpu in machine.gpus:
        assert math.isfinite(gpu.power_w.peek())


@FUZZ
@given(st.text(max_size=200))
def test_any_toml_text_parses_or_is_one_line(text: str) -> None:
    try:
        loads_toml(text)
    except TomlTextError as exc:
        one_line(str(exc))


def test_a_config_key_that_is_not_unicode_is_one_problem() -> None:
    """Found by the property test above: a lone surrogate in a key reached pydantic's core."""
    try:
        parse_config({"queues": [{"name": "default"}], "pitfalls": {"\ud800": 1}})
    except ConfigError as exc:
        assert exc.problems == ["a key or value is not valid Unicode text (a lone surrogate)"]
    else:
        raise AssertionError("accepted a key that is not Unicode text")
