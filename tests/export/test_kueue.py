"""``labgang export kueue``: every cluster config in ``config/`` exports to objects that follow
Kueue v1beta2's rules (``kueue_rules``) and carry the config's policy (round trip); the
output is deterministic; configs Kueue cannot take fail with a named field.

With ``LABGANG_KUEUE_CRDS`` set to a folder of Kueue's CRD files
(``config/components/crd/bases`` of a Kueue checkout), the export is also validated
against the CRDs' own ``openAPIV3Schema`` with jsonschema.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kueue_rules
import pytest
import yaml
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, load_config, parse_config
from labgang.launcher.export import kueue
from labgang.launcher.export.common import ExportError, Inventory
from labgang.launcher.export.inventory import from_files

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "config" / "sim"
CONFIGS = sorted(p for p in (REPO / "config").glob("*.toml") if "[[queues]]" in p.read_text())
INVENTORIES = {
    "none": [],
    "mig+h100": [SIM / "a100x8-mig.toml", SIM / "h100x8.toml"],
    "rtx": [SIM / "rtx4090x2.toml"],
}
_WITHIN = {
    "never": "Never",
    "lower-priority": "LowerPriority",
    "lower-or-newer-equal-priority": "LowerOrNewerEqualPriority",
}
_RECLAIM = {"never": "Never", "lower-priority": "LowerPriority", "any": "Any"}


def _objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _inv(key: str) -> Inventory:
    return from_files(INVENTORIES[key]) if INVENTORIES[key] else Inventory()


def _k8s(name: str) -> str:
    return name.lower().replace("_", "-")


def assert_round_trip(cfg: ClusterConfig, objs: list[dict[str, Any]]) -> None:
    """The objects say what ``cfg`` says: quotas summed over flavors, limits, cohorts, preemption, queues."""
    kinds: dict[str, dict[str, dict[str, Any]]] = {}
    for o in objs:
        kinds.setdefault(o["kind"], {})[o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]] = o
    cqs = {k.split("/")[1]: o for k, o in kinds["ClusterQueue"].items()}
    assert sorted(cqs) == sorted(_k8s(q.name) for q in cfg.queues)
    flavors = {k.split("/")[1] for k in kinds["ResourceFlavor"]}
    lqs = list(kinds["LocalQueue"].values())
    for q in cfg.queues:
        spec = cqs[_k8s(q.name)]["spec"]
        sums: dict[str, dict[str, int]] = {"nominalQuota": {}, "borrowingLimit": {}, "lendingLimit": {}}
        per_resource_flavors: dict[str, int] = {}
        for group in spec["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors, f"{flavor['name']} has no ResourceFlavor"
                for r in flavor["resources"]:
                    per_resource_flavors[r["name"]] = per_resource_flavors.get(r["name"], 0) + 1
                    for key, acc in sums.items():
                        if key in r:
                            acc[r["name"]] = acc.get(r["name"], 0) + r[key]
        for resource, n in q.nominal.items():
            assert sums["nominalQuota"]["nvidia.com/" + resource] == n
        assert sum(sums["nominalQuota"].values()) == sum(q.nominal.values())
        assert {k.removeprefix("nvidia.com/"): v for k, v in sums["borrowingLimit"].items()} == q.borrowing_limit
        for resource, limit in q.lending_limit.items():
            got = sums["lendingLimit"]["nvidia.com/" + resource]
            assert got <= limit
            if per_resource_flavors["nvidia.com/" + resource] == 1:
                assert got == limit
        assert spec.get("cohortName") == (_k8s(q.cohort) if q.cohort else None)
        assert spec["preemption"]["withinClusterQueue"] == _WITHIN[q.within_queue.value]
        assert spec["preemption"]["reclaimWithinCohort"] == _RECLAIM[q.reclaim_within_cohort.value]
        assert (
            spec["queueingStrategy"]
            == {"best-effort-fifo": "BestEffortFIFO", "strict-fifo": "StrictFIFO"}[q.queueing.value]
        )
        mine = sorted(lq["metadata"]["namespace"] for lq in lqs if lq["spec"]["clusterQueue"] == _k8s(q.name))
        assert mine, f"no LocalQueue for {q.name}"
        selector = spec["namespaceSelector"]["matchExpressions"][0]
        assert selector["key"] == "kubernetes.io/metadata.name" and selector["operator"] == "In"
        assert selector["values"] == mine
    wpcs = {o["metadata"]["name"]: o["value"] for o in kinds.get("WorkloadPriorityClass", {}).values()}
    assert wpcs == {_k8s(n): v for n, v in cfg.priority_classes.items()}
    cohorts = {o["metadata"]["name"] for o in kinds.get("Cohort", {}).values()}
    assert cohorts == {_k8s(c.name) for c in cfg.cohorts} | {_k8s(q.cohort) for q in cfg.queues if q.cohort}
    by_cohort = {o["metadata"]["name"]: o["spec"] for o in kinds.get("Cohort", {}).values()}
    for c in cfg.cohorts:
        spec = by_cohort[_k8s(c.name)]
        assert spec.get("parentName") == (_k8s(c.parent) if c.parent else None)
        totals: dict[str, int] = {}
        borrowing: dict[str, int] = {}
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    key = r["name"].removeprefix("nvidia.com/")
                    totals[key] = totals.get(key, 0) + r["nominalQuota"]
                    if "borrowingLimit" in r:
                        borrowing[key] = borrowing.get(key, 0) + r["borrowingLimit"]
        assert {k: v for k, v in totals.items() if v} == {k: v for k, v in c.nominal.items() if v}
        assert borrowing == c.borrowing_limit
        if cfg.fair_sharing:
            assert float(spec["fairSharing"]["weight"]) == c.fair_weight
    for q in cfg.queues:
        spec = cqs[_k8s(q.name)]["spec"]
        if cfg.fair_sharing:
            assert float(spec["fairSharing"]["weight"]) == q.fair_weight
        assert ("admissionScope" in spec) == (cfg.admission_fair_sharing is not None)
    namespaces = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    assert namespaces == {lq["metadata"]["namespace"] for lq in lqs}


@pytest.mark.parametrize("namespace_per", kueue.NAMESPACE_PER)
@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_exports_valid_objects(config: Path, inventory: str, namespace_per: str) -> None:
    cfg = load_config(config)
    result = kueue.export(cfg, _inv(inventory), str(config), namespace_per)
    objs = _objects(result.files[kueue.FILE_NAME])
    found = [p for o in objs if o["kind"] != "Namespace" for p in kueue_rules.problems(o)]
    assert found == []
    assert_round_trip(cfg, objs)
    header = result.files[kueue.FILE_NAME].split("---", 1)[0]
    for gap in result.gaps:
        assert f"# - {gap.line()}" in header


def test_config_in_repo_is_covered() -> None:
    assert {REPO / "config" / "cluster.toml", REPO / "config" / "cluster-tree.toml"} <= set(CONFIGS)


def test_cohort_tree_and_weights() -> None:
    cfg = load_config(REPO / "config" / "cluster-tree.toml")
    result = kueue.export(cfg, Inventory(), "x")
    objs = _objects(result.files[kueue.FILE_NAME])
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Cohort"}
    assert cohorts["vision"]["parentName"] == "dept" and cohorts["nlp"]["parentName"] == "dept"
    assert "parentName" not in cohorts["dept"]
    assert cohorts["vision"]["fairSharing"] == {"weight": "2"}
    gpu = cohorts["vision"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 0, "lendingLimit": 4}
    dev = next(o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "vision-dev")
    assert dev["spec"]["fairSharing"] == {"weight": "0.5"}
    assert dev["spec"]["admissionScope"] == {"admissionMode": "UsageBasedAdmissionFairSharing"}
    fields = {g.field for g in result.gaps}
    assert {"fair_sharing, fair_preemption", "admission_fair_sharing", "tenants[0]"} <= fields


def test_inventory_gives_flavors_per_model_and_mig_profile() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    objs = _objects(kueue.export(cfg, _inv("mig+h100"), "x").files[kueue.FILE_NAME])
    flavors = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "ResourceFlavor"}
    assert flavors["nvidia-h100-80gb-hbm3"] == {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    assert flavors["nvidia-a100-sxm4-80gb"] == {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
    assert flavors["mig-1g.10gb"]["nodeLabels"]["nvidia.com/mig.strategy"] == "mixed"
    assert {"mig-3g.40gb", "mig-7g.80gb", "mig-1c.3g.40gb"} <= set(flavors)
    # team-a's 8 GPUs over 3 A100 + 8 H100 whole GPUs: split 2/6 by share, and said so
    cq = next(o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "team-a")
    gpu = next(g for g in cq["spec"]["resourceGroups"] if g["coveredResources"] == ["nvidia.com/gpu"])
    assert [(f["name"], f["resources"][0]["nominalQuota"]) for f in gpu["flavors"]] == [
        ("nvidia-a100-sxm4-80gb", 2),
        ("nvidia-h100-80gb-hbm3", 6),
    ]


def test_no_inventory_uses_one_generic_gpu_flavor() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    result = kueue.export(cfg, Inventory(), "x")
    objs = _objects(result.files[kueue.FILE_NAME])
    flavors = sorted(o["metadata"]["name"] for o in objs if o["kind"] == "ResourceFlavor")
    assert flavors == ["mig-1g.10gb", "nvidia-gpu"]
    assert not any(g.field.endswith("nominal.gpu") for g in result.gaps)


def test_gaps_name_what_kueue_cannot_express() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    fields = {g.field for g in kueue.export(cfg, Inventory(), "x").gaps}
    assert {"queues[0].groups", "queues[0].starvation_after", "queues[2].users", "default_grace_s"} <= fields
    group_mode = {g.field: g for g in kueue.export(cfg, Inventory(), "x", "group").gaps}
    assert "namespace" in group_mode["queues[0].groups"].lost


def test_namespace_per_group() -> None:
    cfg = parse_config(
        {
            "default_queue": "shared",
            "queues": [
                {"name": "shared", "nominal": {"gpu": 4}, "groups": ["vision", "nlp"]},
                {"name": "open", "nominal": {"gpu": 1}},
            ],
        }
    )
    objs = _objects(kueue.export(cfg, Inventory(), "x", "group").files[kueue.FILE_NAME])
    lqs = sorted((o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in objs if o["kind"] == "LocalQueue")
    assert lqs == [("nlp", "shared"), ("open", "open"), ("vision", "shared")]


def test_output_is_deterministic_and_independent_of_queue_order() -> None:
    queues: list[dict[str, Any]] = [
        {"name": "b", "cohort": "lab", "nominal": {"gpu": 2, "mig-1g.10gb": 3}},
        {"name": "a", "cohort": "lab", "nominal": {"gpu": 1}, "lending_limit": {"gpu": 1}},
    ]
    data: dict[str, Any] = {
        "default_queue": "b",
        "priority_classes": {"z": 1, "a": 2},
        "cohorts": [{"name": "lab"}],
        "queues": queues,
    }
    swapped = {**data, "queues": list(reversed(queues))}
    inv = _inv("mig+h100")
    first = kueue.export(parse_config(data), inv, "x").files[kueue.FILE_NAME]
    assert kueue.export(parse_config(data), inv, "x").files[kueue.FILE_NAME] == first
    other = kueue.export(parse_config(swapped), inv, "x").files[kueue.FILE_NAME]
    assert _objects(other) == _objects(first)  # comments differ only in queues[i] indexes
    kinds = [o["kind"] for o in _objects(first)]
    assert kinds == sorted(
        kinds,
        key=["Namespace", "WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"].index,
    )


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"queues": [{"name": "default", "cohort": "c", "borrow_within_cohort": {"policy": "lower-priority"}}]},
            "queues[0].borrow_within_cohort.policy",
        ),
        ({"queues": [{"name": "default"}, {"name": "Default"}]}, "queues[1].name"),
        ({"queues": [{"name": "default"}, {"name": "a..b"}]}, "queues[1].name"),
        (
            {"cohorts": [{"name": "Lab Team!"}], "queues": [{"name": "default", "cohort": "Lab Team!"}]},
            "cohorts[0].name",
        ),
        ({"fair_sharing": True, "queues": [{"name": "default", "fair_weight": 1e-12}]}, "queues[0].fair_weight"),
        (
            {
                "queues": [
                    {"name": "default", "borrow_within_cohort": {"policy": "never", "max_priority_threshold": -(2**40)}}
                ]
            },
            "queues[0].borrow_within_cohort.max_priority_threshold",
        ),
    ],
    ids=[
        "bwc-without-reclaim",
        "names-collide",
        "bad-name",
        "bad-cohort-name",
        "tiny-weight",
        "threshold-int32",
    ],
)
def test_unexportable_configs_name_the_field(data: dict[str, Any], field: str) -> None:
    cfg = parse_config(data)
    with pytest.raises(ExportError) as err:
        kueue.export(cfg, Inventory(), "x")
    assert err.value.field == field
    assert "allowed" in err.value.message


def test_more_than_16_resources_is_refused() -> None:
    profiles = [f"{n}g.{n * 10}gb" for n in range(1, 18)]
    cfg = parse_config({"queues": [{"name": "default", "nominal": {f"mig-{p}": 1 for p in profiles}}]})
    with pytest.raises(ExportError) as err:
        kueue.export(cfg, Inventory(), "x")
    assert err.value.field == "queues[0].nominal"


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda o: o["spec"].update(queueingStrategy="FIFO"), "queueingStrategy"),
        (lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop("nominalQuota"), "nominalQuota"),
        (
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(lendingLimit=99),
            "lendingLimit",
        ),
        (lambda o: o["spec"].pop("cohortName"), "needs a cohort"),
        (
            lambda o: o["spec"]["preemption"].update(
                reclaimWithinCohort="Never", borrowWithinCohort={"policy": "LowerPriority"}
            ),
            "borrowWithinCohort",
        ),
        (lambda o: o["spec"]["resourceGroups"].append(o["spec"]["resourceGroups"][0]), "two resource groups"),
        (lambda o: o["metadata"].update(name="Team_A"), "DNS-1123"),
    ],
    ids=["enum", "required", "lend-above-nominal", "limit-without-cohort", "bwc-needs-reclaim", "dup-resource", "name"],
)
def test_rules_catch_broken_objects(mutate: Any, expect: str) -> None:
    """The rule checker is not vacuous: each broken copy of a valid ClusterQueue is reported."""
    cfg = load_config(REPO / "config" / "cluster.toml")
    objs = _objects(kueue.export(cfg, Inventory(), "x").files[kueue.FILE_NAME])
    cq = next(o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "team-b")
    assert kueue_rules.problems(cq) == []
    mutate(cq)
    found = kueue_rules.problems(cq)
    assert any(expect in p for p in found), found


CRDS = os.environ.get("LABGANG_KUEUE_CRDS")


@pytest.mark.skipif(
    not CRDS,
    reason="LABGANG_KUEUE_CRDS is not set (a folder with Kueue's CRD YAML files, config/components/crd/bases); "
    "the rules in kueue_rules.py are checked without it",
)
@pytest.mark.parametrize("namespace_per", kueue.NAMESPACE_PER)
@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_export_validates_against_kueue_crds(config: Path, inventory: str, namespace_per: str) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="LABGANG_KUEUE_CRDS needs `pip install jsonschema`")
    schemas: dict[str, Any] = {}
    for path in Path(str(CRDS)).glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            continue
        for version in crd["spec"]["versions"]:
            if version["name"] == "v1beta2":
                assert version["served"] and version["storage"], f"{path}: v1beta2 is not the served storage version"
                schemas[crd["spec"]["names"]["kind"]] = _json_schema(version["schema"]["openAPIV3Schema"])
    cfg = load_config(config)
    objs = _objects(kueue.export(cfg, _inv(inventory), str(config), namespace_per).files[kueue.FILE_NAME])
    checked = 0
    for obj in objs:
        if obj["kind"] == "Namespace":
            continue
        errors = [e.message for e in jsonschema.Draft7Validator(schemas[obj["kind"]]).iter_errors(obj)]
        assert errors == [], f"{obj['kind']}/{obj['metadata']['name']}: {errors}"
        checked += 1
    assert checked >= len(cfg.queues) * 2


def _json_schema(node: Any) -> Any:
    """Kubernetes OpenAPI v3 -> JSON Schema: drop ``x-kubernetes-*``; int-or-string becomes anyOf."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if node.get("x-kubernetes-int-or-string"):
        pattern = out.pop("pattern", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string", **({"pattern": pattern} if pattern else {})}]
    return out


def test_a_priority_beyond_int32_never_reaches_the_export() -> None:
    """A class beyond a job's 32-bit priority (above Kueue's int32 range) is refused where the config is
    read, naming the class, so no export sees it (the export's own range check stays as a guard)."""
    with pytest.raises(ConfigError) as err:
        parse_config({"priority_classes": {"huge": 2**31}, "queues": [{"name": "default"}]})
    problems = err.value.problems
    assert any(p.startswith("priority_classes.huge: ") and "out of range" in p for p in problems), problems
