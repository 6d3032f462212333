"""Counts and times in ``cluster.toml`` are numbers, never ``true`` or ``"3"``: one line naming the key."""

from __future__ import annotations

import pytest
from labgang.launcher.config.cluster import ConfigError, parse_config


def config(queue: dict[str, object] | None = None, **top: object) -> dict:
    return {"default_queue": "q", "queues": [{"name": "q", "nominal": {"gpu": 4}, **(queue or {})}], **top}


@pytest.mark.parametrize(
    "queue,top,line",
    [
        (
            {"nominal": {"gpu": True}},
            {},
            "queues[0].nominal.gpu: true is not allowed; allowed: a device count from 0 to 1000000",
        ),
        (
            {"nominal": {"gpu": "3"}},
            {},
            "queues[0].nominal.gpu: '3' is not allowed; allowed: a device count from 0 to 1000000",
        ),
        (
            {"nominal": {"gpu": 1.5}},
            {},
            "queues[0].nominal.gpu: 1.5 is not allowed; allowed: a device count from 0 to 1000000",
        ),
        ({"fair_weight": True}, {}, "queues[0].fair_weight: true is not allowed; allowed: a number"),
        ({"starvation_after": "60"}, {}, "queues[0].starvation_after: '60' is not allowed; allowed: a number"),
        (None, {"node_timeout_s": True}, "node_timeout_s: true is not allowed; allowed: a number"),
        (None, {"max_start_failures": True}, "max_start_failures: true is not allowed; allowed: an integer"),
        (None, {"tcp_port": "7461"}, "tcp_port: '7461' is not allowed; allowed: an integer"),
        (
            None,
            {"priority_classes": {"high": True}},
            "priority_classes.high: true is not allowed; allowed: an integer",
        ),
    ],
)
def test_a_bool_or_string_count_is_one_line_naming_the_key(queue, top, line) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(queue, **top))
    assert info.value.problems == [line]


def test_numbers_still_load() -> None:
    cfg = parse_config(config({"fair_weight": 2, "starvation_after": 1.5}, node_timeout_s=5, tcp_port=7461))
    assert (cfg.queues[0].nominal, cfg.queues[0].fair_weight, cfg.node_timeout_s) == ({"gpu": 4}, 2.0, 5.0)


def test_limits_are_numbers_not_bools_or_strings() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(limits={"max_connections": True, "header_timeout_s": "5", "page_size": 2.0}))
    assert sorted(info.value.problems) == [
        "limits.header_timeout_s: '5' is not allowed; allowed: a number",
        "limits.max_connections: true is not allowed; allowed: an integer",
        "limits.page_size: 2.0 is not allowed; allowed: an integer",
    ]
    assert parse_config(config(limits={"header_timeout_s": 5, "page_size": 100})).limits.header_timeout_s == 5.0
