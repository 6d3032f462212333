"""``labgang plan serve``: how many replicas (and GPUs) an inference deployment needs.

The method capacity planners use (docs/planning.md), every step a plain formula so that the
printed arithmetic can be checked by hand:

1. **Throughput**: replicas ``= λ × output tokens ÷ replica throughput`` (tok/s decoded by one
   replica, summed over its concurrent requests).
2. **Concurrency** (Little's law): a request's response time is ``output tokens ÷ (replica
   throughput ÷ C)`` (each of the C concurrent requests decodes at 1/C of the replica's rate);
   requests in flight ``L = λ × response time``; replicas ``= L ÷ C``.
3. **KV cache**: each request in flight holds ``input + output`` tokens of KV cache; the replicas
   must hold them all at once: replicas ``= L × (input + output) ÷ KV capacity``. A single
   request larger than one replica's KV capacity can never be served: no answer.
4. The largest of the three fractional needs, times ``1 + headroom``, rounded up, plus the
   spares (N+k). GPUs ``= replicas × TP size``; with ``--node-gpus``, whole nodes.

The slot utilization the answer leads to is ``L ÷ (replicas × C)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MAX_REPLICAS = 1_000_000
"""The most replicas (and spares) a plan answers with: a need above it is taken for a mistaken
input (a rate or throughput off by orders of magnitude), said instead of a 300-digit answer."""
MAX_TP = 4096
"""The largest tensor-parallel size and node size accepted (GPUs)."""


class CannotServe(ValueError):
    """The request shape cannot be served at all (one request's KV cache exceeds a replica's), or
    the need exceeds :data:`MAX_REPLICAS`."""


@dataclass(frozen=True)
class ServeInputs:
    """What ``plan serve`` is asked.

    Attributes:
        rate: λ, requests per second (> 0).
        input_tokens / output_tokens: tokens per request (input >= 0, output > 0).
        replica_throughput: one replica's decode throughput, tokens/s summed over its concurrent
            requests, measured at ``concurrency`` (> 0).
        concurrency: C, the concurrent requests one replica was measured at and serves (>= 1).
        kv_tokens: one replica's KV-cache capacity in tokens (> 0).
        headroom: fraction added to the need (0.3 = 30 %), >= 0.
        spares: whole replicas added after rounding (N+k), >= 0.
        tp: tensor-parallel size, GPUs per replica (>= 1).
        node_gpus: GPUs per node, for a whole-node answer (None: no node count).
    """

    rate: float
    input_tokens: int
    output_tokens: int
    replica_throughput: float
    concurrency: int
    kv_tokens: int
    headroom: float = 0.3
    spares: int = 1
    tp: int = 1
    node_gpus: int | None = None


@dataclass(frozen=True)
class ServePlan:
    """The answer, with every intermediate figure.

    Attributes:
        by_throughput / by_concurrency / by_kv: fractional replicas each step needs.
        response_s: one request's response time, seconds.
        in_flight: requests in flight (Little's law).
        need: the largest fractional need; ``bound``: which step it came from
            ("throughput", "concurrency" or "kv").
        with_headroom: ``need × (1 + headroom)``.
        replicas: ``ceil(with_headroom) + spares``.
        gpus: ``replicas × tp``.
        replicas_per_node / nodes: whole nodes (None without ``node_gpus``).
        slot_utilization: ``in_flight ÷ (replicas × C)``, 0..1.
        steps: the arithmetic, one printable line each.
    """

    inputs: ServeInputs
    by_throughput: float
    response_s: float
    in_flight: float
    by_concurrency: float
    kv_per_request: int
    by_kv: float
    need: float
    bound: str
    with_headroom: float
    replicas: int
    gpus: int
    replicas_per_node: float | None
    nodes: int | None
    slot_utilization: float
    steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: inputs, each step's figure, ``replicas`` and ``gpus``."""
        i = self.inputs
        return {
            "inputs": {
                "rate": i.rate,
                "input_tokens": i.input_tokens,
                "output_tokens": i.output_tokens,
                "replica_throughput": i.replica_throughput,
                "replica_concurrency": i.concurrency,
                "kv_tokens": i.kv_tokens,
                "headroom": i.headroom,
                "spares": i.spares,
                "tp": i.tp,
                "node_gpus": i.node_gpus,
            },
            "replicas_by_throughput": self.by_throughput,
            "response_time_s": self.response_s,
            "in_flight": self.in_flight,
            "replicas_by_concurrency": self.by_concurrency,
            "kv_tokens_per_request": self.kv_per_request,
            "replicas_by_kv": self.by_kv,
            "need": self.need,
            "bound": self.bound,
            "with_headroom": self.with_headroom,
            "replicas": self.replicas,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "slot_utilization": self.slot_utilization,
            "steps": self.steps,
        }


def _g(x: float) -> str:
    """A figure as people write it: up to 4 significant decimals, no trailing zeros."""
    text = f"{x:.4f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def plan_serve(i: ServeInputs) -> ServePlan:
    """Size a serving deployment by the method in the module docstring.

    Raises:
        CannotServe: one request (input + output tokens) does not fit one replica's KV cache.
        ValueError: an input out of range (named, with what is allowed).
    """
    for name, value, ok, allowed in (
        ("--rate", i.rate, 0 < i.rate < math.inf, "> 0 and finite"),
        ("--input-tokens", i.input_tokens, i.input_tokens >= 0, ">= 0"),
        ("--output-tokens", i.output_tokens, i.output_tokens > 0, "> 0"),
        ("--replica-throughput", i.replica_throughput, 0 < i.replica_throughput < math.inf, "> 0 and finite"),
        ("--replica-concurrency", i.concurrency, i.concurrency >= 1, ">= 1"),
        ("--kv-tokens", i.kv_tokens, i.kv_tokens > 0, "> 0"),
        ("--headroom", i.headroom, 0 <= i.headroom < math.inf, ">= 0 and finite"),
        ("--spares", i.spares, 0 <= i.spares <= MAX_REPLICAS, f"0..{MAX_REPLICAS}"),
        ("--tp", i.tp, 1 <= i.tp <= MAX_TP, f"1..{MAX_TP}"),
        ("--node-gpus", i.node_gpus, i.node_gpus is None or 1 <= i.node_gpus <= MAX_TP, f"1..{MAX_TP}"),
    ):
        if not ok:
            raise ValueError(f"{name}: {value} is not allowed; allowed: {allowed}")
    per_request = i.input_tokens + i.output_tokens
    if per_request > i.kv_tokens:
        raise CannotServe(
            f"one request holds {i.input_tokens} + {i.output_tokens} = {per_request} tokens of KV cache, "
            f"more than one replica's KV capacity ({i.kv_tokens} tokens): this request shape cannot be "
            "served at all; use a larger --tp (more KV memory per replica) or shorter requests"
        )
    lam, c, t = i.rate, i.concurrency, i.replica_throughput
    steps: list[str] = []
    by_tp = lam * i.output_tokens / t
    steps.append(
        f"1. throughput:  {_g(lam)} req/s x {i.output_tokens} output tokens / {_g(t)} tok/s per replica"
        f" = {_g(by_tp)} replicas"
    )
    per_request_rate = t / c
    response = i.output_tokens / per_request_rate
    in_flight = lam * response
    by_conc = in_flight / c
    steps.append(
        f"2. concurrency: response time = {i.output_tokens} tokens / ({_g(t)} / {c} tok/s per request)"
        f" = {_g(response)} s; in flight (Little) = {_g(lam)} x {_g(response)} = {_g(in_flight)} requests;"
        f" / {c} per replica = {_g(by_conc)} replicas"
    )
    by_kv = in_flight * per_request / i.kv_tokens
    steps.append(
        f"3. KV cache:    {_g(in_flight)} requests x ({i.input_tokens} + {i.output_tokens}) tokens"
        f" = {_g(in_flight * per_request)} tokens / {i.kv_tokens} per replica = {_g(by_kv)} replicas"
        + (f" (one replica holds at most {i.kv_tokens // per_request} requests < C = {c})" if by_kv > by_conc else "")
    )
    need, bound = max((by_tp, "throughput"), (by_conc, "concurrency"), (by_kv, "kv"), key=lambda p: p[0])
    with_headroom = need * (1 + i.headroom)
    if not with_headroom <= MAX_REPLICAS:  # also infinity and NaN (a throughput of 1e-300 tok/s)
        raise CannotServe(
            f"the need is {with_headroom:.4g} replicas ({bound}-bound, with headroom): more than "
            f"{MAX_REPLICAS} replicas is no deployment to plan; check --rate (requests/s) and "
            "--replica-throughput (tokens/s of one replica, summed over its requests)"
        )
    base = math.ceil(with_headroom - 1e-9)
    replicas = max(1, base) + i.spares
    steps.append(
        f"4. replicas:    max({_g(by_tp)}, {_g(by_conc)}, {_g(by_kv)}) = {_g(need)} ({bound}) x (1 + {_g(i.headroom)})"
        f" = {_g(with_headroom)} -> {max(1, base)}, + {i.spares} spare{'s' if i.spares != 1 else ''}"
        f" = {replicas} replicas"
    )
    gpus = replicas * i.tp
    line = f"5. GPUs:        {replicas} replicas x TP {i.tp} = {gpus} GPUs"
    per_node: float | None = None
    nodes: int | None = None
    if i.node_gpus is not None:
        if i.tp <= i.node_gpus:
            fit = i.node_gpus // i.tp
            per_node = fit
            nodes = math.ceil(replicas / fit)
            line += f"; {i.node_gpus} GPUs per node hold {fit} replicas -> {nodes} node{'s' if nodes != 1 else ''}"
        else:
            span = math.ceil(i.tp / i.node_gpus)
            per_node = 1 / span
            nodes = replicas * span
            line += f"; a replica spans {span} nodes of {i.node_gpus} GPUs -> {nodes} nodes"
    steps.append(line)
    util = in_flight / (replicas * c)
    steps.append(f"   slot utilization: {_g(in_flight)} in flight / ({replicas} replicas x {c}) = {util * 100:.1f}%")
    return ServePlan(
        i,
        by_tp,
        response,
        in_flight,
        by_conc,
        per_request,
        by_kv,
        need,
        bound,
        with_headroom,
        replicas,
        gpus,
        per_node,
        nodes,
        util,
        steps,
    )
