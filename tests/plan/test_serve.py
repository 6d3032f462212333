"""``labgang plan serve``: the method's answer on hand-computed cases (docs/planning.md)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.main import cli
from labgang.launcher.plan.serve import CannotServe, ServeInputs, plan_serve


def test_docs_example_throughput_bound_tp2() -> None:
    # λ=12/s, 300 output tokens, 2400 tok/s at C=32:
    # throughput 12*300/2400 = 1.5; response 300/(2400/32) = 4 s, L = 48, 48/32 = 1.5;
    # KV 48*(1500+300)/400000 = 0.216; need 1.5*1.3 = 1.95 -> 2, +1 spare = 3; TP 2 -> 6 GPUs;
    # 8-GPU nodes hold 4 replicas -> 1 node; slots 48/(3*32) = 0.5.
    p = plan_serve(ServeInputs(12, 1500, 300, 2400, 32, 400_000, tp=2, node_gpus=8))
    assert p.by_throughput == pytest.approx(1.5)
    assert p.response_s == pytest.approx(4.0)
    assert p.in_flight == pytest.approx(48.0)
    assert p.by_concurrency == pytest.approx(1.5)
    assert p.by_kv == pytest.approx(0.216)
    assert p.bound == "throughput"
    assert p.with_headroom == pytest.approx(1.95)
    assert (p.replicas, p.gpus, p.nodes) == (3, 6, 1)
    assert p.slot_utilization == pytest.approx(0.5)


def test_kv_bound() -> None:
    # Same load, KV capacity 40000: 48*1800/40000 = 2.16 replicas > 1.5; 2.16*1.3 = 2.808 -> 3, +1 = 4.
    p = plan_serve(ServeInputs(12, 1500, 300, 2400, 32, 40_000, tp=2, node_gpus=8))
    assert p.bound == "kv"
    assert p.by_kv == pytest.approx(2.16)
    assert (p.replicas, p.gpus, p.nodes) == (4, 8, 1)
    assert p.slot_utilization == pytest.approx(48 / 128)
    assert "one replica holds at most 22 requests < C = 32" in p.steps[2]


def test_tp_above_node_size_spans_nodes_and_headroom_spares() -> None:
    # λ=50/s, 200 output tokens, 5000 tok/s at C=64: 50*200/5000 = 2.0; response 200/(5000/64) = 2.56 s,
    # L = 128, 128/64 = 2.0; KV 128*(1000+200)/1e6 = 0.1536. 2.0*1.5 = 3.0 -> 3, +2 spares = 5 replicas;
    # TP 16 on 8-GPU nodes: 2 nodes per replica -> 80 GPUs, 10 nodes.
    p = plan_serve(ServeInputs(50, 1000, 200, 5000, 64, 1_000_000, headroom=0.5, spares=2, tp=16, node_gpus=8))
    assert p.response_s == pytest.approx(2.56)
    assert p.in_flight == pytest.approx(128.0)
    assert (p.replicas, p.gpus, p.nodes) == (5, 80, 10)


def test_tp3_on_8_gpu_nodes_leaves_two_gpus_per_node() -> None:
    # need 0.5 (1 req/s x 100 / 200): 0.5*1.3 = 0.65 -> 1, +1 = 2 replicas; 8 // 3 = 2 per node -> 1 node.
    p = plan_serve(ServeInputs(1, 10, 100, 200, 4, 10_000, tp=3, node_gpus=8))
    assert (p.replicas, p.gpus, p.nodes) == (2, 6, 1)


def test_request_larger_than_kv_cache_has_no_answer() -> None:
    with pytest.raises(CannotServe, match="150300 tokens of KV cache, more than one replica's KV capacity"):
        plan_serve(ServeInputs(1, 150_000, 300, 2400, 32, 40_000))


def test_cli_json_and_refusals() -> None:
    args = ["plan", "serve", "--rate", "12", "--input-tokens", "1500", "--output-tokens", "300"]
    args += ["--replica-throughput", "2400", "--replica-concurrency", "32", "--kv-tokens", "40000", "--tp", "2"]
    out = CliRunner().invoke(cli, [*args, "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["replicas"], doc["gpus"], doc["bound"]) == (4, 8, "kv")
    text = CliRunner().invoke(cli, args)
    assert "= 2.808 -> 3, + 1 spare = 4 replicas" in text.output
    assert "answer: 4 replicas, 8 GPUs" in text.output
    too_big = CliRunner().invoke(cli, [*args[:5], "150000", *args[6:]])
    assert too_big.exit_code == 1
    assert "cannot be served at all" in too_big.output
    bad = CliRunner().invoke(cli, [*args, "--headroom", "-0.1"])
    assert bad.exit_code == 2
    assert "--headroom: -0.1 is not allowed; allowed: >= 0" in bad.output


def test_infinite_inputs_are_refused_like_nan() -> None:
    args = ["plan", "serve", "--input-tokens", "500", "--kv-tokens", "200000", "--replica-concurrency", "16"]
    args += ["--output-tokens", "200", "--replica-throughput", "1000", "--rate", "10"]
    for flag, allowed in (
        ("--rate", "> 0 and finite"),
        ("--headroom", ">= 0 and finite"),
        ("--replica-throughput", "> 0 and finite"),
    ):
        out = CliRunner().invoke(cli, [*args, flag, "inf"])
        assert out.exit_code == 2, out.output
        assert out.output.strip().splitlines()[-1].endswith(f"{flag}: inf is not allowed; allowed: {allowed}")
        assert "Traceback" not in out.output


@pytest.mark.parametrize(
    ("rate", "throughput"),
    [(12, 1e-300), (1e300, 2400)],  # a need of infinity (it crashed) and of 2.8e299 (a 300-digit answer)
)
def test_a_need_beyond_a_million_replicas_is_refused_in_one_line(rate: float, throughput: float) -> None:
    args = ["plan", "serve", "--rate", str(rate), "--input-tokens", "1500", "--output-tokens", "300"]
    args += ["--replica-throughput", str(throughput), "--replica-concurrency", "32", "--kv-tokens", "40000"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1, out.output
    assert "more than 1000000 replicas is no deployment to plan; check --rate" in out.output
    assert len(out.output.strip().splitlines()) == 1, out.output  # no traceback
    # the bound itself is an answer: a need of exactly 1,000,000 (0 headroom, 0 spares) is given
    edge = plan_serve(ServeInputs(1_000_000, 0, 100, 100, 1, 1000, headroom=0, spares=0))
    assert edge.replicas == 1_000_000


def test_tp_and_node_size_are_bounded() -> None:
    base = ["plan", "serve", "--rate", "1", "--input-tokens", "10", "--output-tokens", "100"]
    base += ["--replica-throughput", "200", "--replica-concurrency", "4", "--kv-tokens", "10000"]
    out = CliRunner().invoke(cli, [*base, "--tp", "99999999999"])
    assert out.exit_code == 2 and "--tp: 99999999999 is not allowed; allowed: 1..4096" in out.output
    out = CliRunner().invoke(cli, [*base, "--node-gpus", "5000"])
    assert out.exit_code == 2 and "--node-gpus: 5000 is not allowed; allowed: 1..4096" in out.output
