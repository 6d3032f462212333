"""Every machine file and every real capture loads and reports exactly what the file says.

Expected values are parsed here independently of the loader (tomllib, regular
expressions over the raw text), then compared with ``labgang nodes --local --simulate F --json``.
"""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.agent.nvml.formats import detect_format, machine_from_text
from labgang.launcher.cli.nodes import nodes

MIB = 2**20
REPO = Path(__file__).resolve().parents[2]
SIM_FILES = sorted((REPO / "config" / "sim").glob("*.toml"))
SHARED = REPO.parent / "shared" / "fixtures" / "real-gpus"
CAPTURES = sorted(p for p in SHARED.glob("*") if p.name != "README.md")
LISTINGS = sorted((REPO / "tests" / "fixtures" / "nvml").glob("*-smi-L.txt"))

# Whole-GPU memory (MiB) of the models the machine files use, as nvidia-smi reports them on real boards.
MODEL_MEMORY_MIB = {"H100-SXM5-80GB": 81559, "A100-SXM4-80GB": 81920, "RTX-4090": 24564, "L40S": 46068}
NOT_MIG_CAPABLE = ("RTX-4090", "L40S")
# GPU-instance memory (MiB) per A100-80GB profile, from NVIDIA's MIG user guide / real captures.
A100_80_PROFILE_MIB = {
    "1g.10gb": 9728,
    "1g.20gb": 19968,
    "2g.20gb": 19968,
    "3g.40gb": 40192,
    "4g.40gb": 40192,
    "7g.80gb": 80896,
}
A100_40_PROFILE_MIB = {"1g.5gb": 4864, "2g.10gb": 9984, "3g.20gb": 19968}


def run_json(path: Path) -> dict:
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_sim_file_and_capture_is_covered():
    assert len(SIM_FILES) >= 6 and {p.name for p in SIM_FILES} >= {
        "h100x8.toml",
        "a100x8-mig.toml",
        "rtx4090x2.toml",
        "h100-mig-pending.toml",
        "n1-4gpu.toml",
        "n2-4gpu.toml",
    }
    assert len(CAPTURES) >= 10


@pytest.mark.parametrize("path", SIM_FILES, ids=lambda p: p.name)
def test_sim_machine_file_reports_what_it_says(path: Path):
    data = tomllib.loads(path.read_text())
    out = run_json(path)
    assert out["hostname"] == data["machine"]["hostname"]
    assert len(out["gpus"]) == len(data["gpu"])
    for gpu, spec in zip(out["gpus"], data["gpu"], strict=True):
        assert gpu["uuid"] == spec["uuid"]
        assert gpu["pci_bus_id"] == spec["pci_bus_id"]
        assert gpu["memory_total_bytes"] == MODEL_MEMORY_MIB[spec["model"]] * MIB
        mig_capable = spec["model"] not in NOT_MIG_CAPABLE
        assert gpu["mig_mode_current"] is (spec.get("mig_current", False) if mig_capable else None)
        if "mig_pending" in spec:
            assert gpu["mig_mode_pending"] is spec["mig_pending"]
        migs = spec.get("mig_device", [])
        assert [(m["uuid"], m["profile"], m["gi_id"], m["ci_id"]) for m in gpu["mig_devices"]] == [
            (m["uuid"], m["profile"], m["gi_id"], m["ci_id"]) for m in migs
        ]
        for m in gpu["mig_devices"]:
            gi_profile = re.sub(r"^\d+c\.", "", m["profile"])
            assert m["memory_total_bytes"] == A100_80_PROFILE_MIB[gi_profile] * MIB
            assert m["parent_uuid"] == spec["uuid"]


def test_two_node_files_have_distinct_uuids():
    uuids = [
        g["uuid"]
        for name in ("n1-4gpu.toml", "n2-4gpu.toml")
        for g in tomllib.loads((REPO / "config" / "sim" / name).read_text())["gpu"]
    ]
    assert len(uuids) == 8 and len(set(uuids)) == 8


# --------------------------------------------------------------------------- independent parsers of real output


def first_q_block(text: str) -> str:
    start = text.index("==============NVSMI LOG==============")
    end = re.search(r"^#{8,}", text[start:], flags=re.M)
    return text[start : start + end.start()] if end else text[start:]


def _find(pattern: str, text: str, flags: int = 0) -> str:
    """Group 1 of the first match of ``pattern`` (the fixture must contain it)."""
    found = re.search(pattern, text, flags=flags)
    assert found is not None, f"{pattern!r} not in the fixture"
    return found.group(1)


def expected_from_q_text(text: str) -> dict:
    block = first_q_block(text)
    gpus = []
    for section in re.split(r"^(?=GPU [0-9A-Fa-f]{8}:)", block, flags=re.M)[1:]:
        uuid = _find(r"^    GPU UUID\s+: (\S+)", section, flags=re.M)
        total = int(_find(r"^    FB Memory Usage\n\s+Total\s+: (\d+) MiB", section, flags=re.M))
        migs = []
        for mig in re.split(r"^    MIG Device\n", section, flags=re.M)[1:]:
            migs.append(
                {
                    "gi_id": int(_find(r"GPU Instance ID\s+: (\d+)", mig)),
                    "ci_id": int(_find(r"Compute Instance ID\s+: (\d+)", mig)),
                    "memory_mib": int(_find(r"FB Memory Usage\n\s+Total\s+: (\d+) MiB", mig)),
                }
            )
        gpus.append({"uuid": uuid, "memory_mib": total, "migs": migs})
    return {"gpus": gpus}


def expected_from_list(text: str) -> list[dict]:
    gpus: list[dict] = []
    for line in text.splitlines():
        m = re.match(r"^GPU \d+: .+ \(UUID: (GPU-[^)]+)\)$", line)
        if m:
            gpus.append({"uuid": m.group(1), "migs": []})
            continue
        m = re.match(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[^)]+)\)$", line)
        if m and gpus:
            gpus[-1]["migs"].append({"profile": m.group(1), "uuid": m.group(2)})
        elif gpus and line.strip() and not m:
            break
    return gpus


def expected_from_xml(text: str) -> dict:
    gpus = []
    for section in re.split(r"<gpu id=", text)[1:]:
        uuid = _find(r"<uuid>(\S+)</uuid>", section)
        migs = [
            {"gi_id": int(gi), "ci_id": int(ci), "memory_mib": int(mem)}
            for gi, ci, mem in re.findall(
                r"<mig_device>.*?<gpu_instance_id>(\d+)</gpu_instance_id>\s*<compute_instance_id>(\d+)</compute_instance_id>"
                r".*?<fb_memory_usage>\s*<total>(\d+) MiB",
                section,
                flags=re.S,
            )
        ]
        mig_part_end = section.find("</mig_devices>")
        rest = section[mig_part_end:] if mig_part_end >= 0 else section
        total = int(_find(r"<fb_memory_usage>\s*<total>(\d+) MiB", rest))
        gpus.append({"uuid": uuid, "memory_mib": total, "migs": migs})
    return {"gpus": gpus, "count": len(re.findall(r"<gpu id=", text))}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_real_capture_reports_exactly_its_gpus_and_mig_devices(path: Path):
    text = path.read_text()
    out = run_json(path)
    got = out["gpus"]
    if "<nvidia_smi_log" in text:
        exp = expected_from_xml(text)
        assert len(got) == exp["count"]
        # the telegraf capture states GPU 0 holds 4x 1g.20gb (GI 3..6, 14 SMs each)
        assert [m["profile"] for m in got[0]["mig_devices"]] == ["1g.20gb"] * 4
        assert [m["sm_count"] for m in got[0]["mig_devices"]] == [14] * 4
    elif "NVSMI LOG" in text:
        exp = expected_from_q_text(text)
        listing = expected_from_list(text)
        if listing:  # transcripts: profiles and MIG UUIDs come from the -L block
            for g, lg in zip(exp["gpus"], listing, strict=False):
                for m, lm in zip(g["migs"], lg["migs"], strict=False):
                    m.update(lm)
    else:  # the default nvidia-smi table: no UUIDs, memory from "used / total"
        rows = re.findall(r"^\|\s+\d+\s+NVIDIA .+\|\s+[0-9A-F]{8}:", text, flags=re.M)
        totals = [int(t) for t in re.findall(r"\|\s+\d+MiB /\s+(\d+)MiB \|", text)]
        assert len(got) == len(rows) == len(totals)
        assert [g["memory_total_bytes"] for g in got] == [t * MIB for t in totals]
        assert all(g["uuid"].startswith("GPU-") for g in got) and len({g["uuid"] for g in got}) == len(got)
        return
    assert len(got) == len(exp["gpus"])
    for g, e in zip(got, exp["gpus"], strict=True):
        assert g["uuid"] == e["uuid"]
        assert g["memory_total_bytes"] == e["memory_mib"] * MIB
        assert [(m["gi_id"], m["ci_id"], m["memory_total_bytes"]) for m in g["mig_devices"]] == [
            (m["gi_id"], m["ci_id"], m["memory_mib"] * MIB) for m in e["migs"]
        ]
        for m, em in zip(g["mig_devices"], e["migs"], strict=True):
            if "profile" in em:
                assert (m["profile"], m["uuid"]) == (em["profile"], em["uuid"])
            assert m["uuid"].startswith("MIG-")
        assert len({m["uuid"] for m in g["mig_devices"]}) == len(g["mig_devices"])


def test_h200_compute_instances_share_their_gpu_instance(real_gpus):
    migs = run_json(real_gpus / "h200-mig-nvidia-smi-capture.txt")["gpus"][0]["mig_devices"]
    assert [m["profile"] for m in migs] == ["1c.3g.71gb", "2c.3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]
    assert [m["gi_id"] for m in migs] == [2, 2, 3, 9, 10]
    assert migs[0]["memory_used_bytes"] == migs[1]["memory_used_bytes"] == 22 * MIB


@pytest.mark.parametrize("path", LISTINGS, ids=lambda p: p.name)
def test_nvidia_smi_L_listing_reports_gpus_mig_profiles_uuids_and_memory(path: Path):
    exp = expected_from_list(path.read_text())
    got = run_json(path)["gpus"]
    assert [g["uuid"] for g in got] == [g["uuid"] for g in exp]
    for g, e in zip(got, exp, strict=True):
        assert [(m["profile"], m["uuid"]) for m in g["mig_devices"]] == [(m["profile"], m["uuid"]) for m in e["migs"]]
        assert g["mig_mode_current"] is bool(e["migs"])
        table = A100_40_PROFILE_MIB if "40GB" in path.name.upper() else A100_80_PROFILE_MIB
        assert [m["memory_total_bytes"] for m in g["mig_devices"]] == [table[m["profile"]] * MIB for m in e["migs"]]
        assert g["memory_total_bytes"] == (40960 if "40GB" in path.name.upper() else 81920) * MIB


def test_legacy_mig_uuids_carry_gi_and_ci_ids():
    got = run_json(REPO / "tests" / "fixtures" / "nvml" / "a100-40gb-legacy-mig-nvidia-smi-L.txt")["gpus"][0]
    assert [(m["gi_id"], m["ci_id"]) for m in got["mig_devices"]] == [(1, 0), (5, 0), (13, 0)]


def test_format_is_detected_from_content_not_the_file_name(tmp_path, real_gpus, sim_dir):
    for src in (
        real_gpus / "a100-sxm4-80gb-mig-gpu0-nvidia-smi-q.xml",
        real_gpus / "h100x8-nvidia-smi-q.txt",
        sim_dir / "rtx4090x2.toml",
    ):
        disguised = tmp_path / ("capture" + {".xml": ".toml", ".txt": ".xml", ".toml": ".txt"}[src.suffix])
        shutil.copy(src, disguised)
        a, b = run_json(src), run_json(disguised)
        assert [g["uuid"] for g in a["gpus"]] == [g["uuid"] for g in b["gpus"]]
    assert detect_format((real_gpus / "h200-mig-nvidia-smi-capture.txt").read_text()) == "smi-q"
    assert detect_format((real_gpus / "h100x8-nvidia-smi.txt").read_text()) == "smi-table"


def test_derived_mig_uuids_are_stable_and_version_5_shaped(real_gpus):
    text = (real_gpus / "a100-sxm4-80gb-mig-gpu0-nvidia-smi-q.xml").read_text()
    first = [m.uuid for m in machine_from_text(text, "a.xml").gpus[0].mig_devices]
    again = [m.uuid for m in machine_from_text(text, "b.xml").gpus[0].mig_devices]
    assert first == again and len(set(first)) == 4
    assert all(
        re.fullmatch(r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", u) for u in first
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[machine]\nhostname = "x"\n[[gpu]]\nmodel = "H100-SXM5-80GB"\ncolour = "red"\n',
            r"gpu\[0\]: unknown field\(s\) colour; allowed: .*uuid",
        ),
        (
            '[machine]\nhostname = "x"\n[[gpu]]\nmodel = "V1000"\n',
            r"gpu.model: unknown model 'V1000'; allowed: H100-SXM5-80GB",
        ),
        (
            '[machine]\nhostname = "x"\n[[gpu]]\nmodel = "RTX-4090"\nmig_current = true\n',
            r"mig_current: .*cannot do MIG",
        ),
        (
            '[machine]\nhostname = "x"\n[[gpu]]\nmodel = "A100-SXM4-80GB"\nmig_current = true\n'
            '[[gpu.mig_device]]\nprofile = "5g.50gb"\ngi_id = 1\nci_id = 0\n',
            r"mig_device.profile: unknown profile '5g.50gb' .*allowed: 1g.10gb",
        ),
        ('[machine]\n[[gpu]]\nmodel = "RTX-4090"\n', r"machine.hostname: missing"),
        (
            '[machine]\nhostname = "x"\n[[gpu]]\nmodel = "H100-SXM5-80GB"\nerrors = { nvmlDeviceGetName = "BROKEN" }\n',
            r"errors.nvmlDeviceGetName: unknown NVML error 'BROKEN'",
        ),
        ("hello world\n", r"bad.toml: not valid TOML: .*\(at line 1, column 7\)"),
        ('[machine\nhostname = "x"\n', r"bad.toml: not valid TOML: .*\(at line 1, column 9\)"),
        ('[[queues]]\nname = "q"\n', r"bad.toml: a TOML file but not a machine file: .*\[machine\].*found: queues"),
    ],
    ids=[
        "unknown-field",
        "unknown-model",
        "mig-on-geforce",
        "unknown-profile",
        "no-hostname",
        "bad-error",
        "garbage-toml",
        "broken-table-header",
        "cluster-config",
    ],
)
def test_bad_machine_files_name_the_field_and_allowed_values(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(path)])
    assert result.exit_code == 2
    assert re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("garbage.txt", "hello world\n", r"garbage.txt: unrecognised format; expected a config/sim TOML machine file"),
        ("capture.txt", 'hostname = "x"\n[[gpu]\n', r"capture.txt: not valid TOML: .*\(at line 2, column 6\)"),
    ],
    ids=["text", "toml-content"],
)
def test_toml_errors_are_reported_when_the_content_looks_like_toml(tmp_path, name, text, message):
    """The TOML parse error (with line and column) is shown when the name ends in .toml or
    the content has TOML lines; other unknown text gets the list of formats."""
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(path)])
    assert result.exit_code == 2
    assert re.search(message, result.stderr), result.stderr


def test_profiles_of_an_unknown_product_are_inferred_from_sms_and_memory(real_gpus):
    """A product missing from the catalogue: -q output without -L still gets -L style names."""
    text = (real_gpus / "h100-mig-nvidia-smi-capture.txt").read_text()
    q = first_q_block(text).replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 Prototype")
    machine = machine_from_text(q, "proto.txt")
    assert [(m.profile, m.sm_count, m.gi_id) for m in machine.gpus[0].mig_devices] == [
        ("3g.40gb", 60, 2),
        ("2g.20gb", 32, 3),
        ("1g.10gb", 16, 9),
        ("1g.10gb", 16, 10),
    ]


def test_compute_instance_split_of_an_unknown_product_is_named_per_instance(real_gpus):
    text = (real_gpus / "h200-mig-nvidia-smi-capture.txt").read_text()
    q = first_q_block(text).replace("NVIDIA H200", "NVIDIA H200 141GB Prototype")
    profiles = [m.profile for m in machine_from_text(q, "proto.txt").gpus[0].mig_devices]
    assert profiles == ["1c.3g.71gb", "2c.3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]


def test_scripted_readings_are_validated(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[machine]\nhostname = "x"\n[[gpu]]\nmodel = "RTX-4090"\nutilization_gpu_pct = ["high"]\n')
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(path)])
    assert result.exit_code == 2
    assert "gpu[0].utilization_gpu_pct: scripted values must be numbers" in result.stderr


def _unindented_listing(gpus: int) -> str:
    """An 8-GPU A100 listing as pasted from NVIDIA's documentation: MIG lines without their indent."""
    lines = []
    for g in range(gpus):
        lines.append(f"GPU {g}: NVIDIA A100-SXM4-80GB (UUID: GPU-{g:08x}-7d2e-4b8a-9c1d-2e5f6a7b8c90)")
        for d, profile in enumerate(("3g.40gb", "2g.20gb", "1g.10gb") if g % 2 == 0 else ("3g.40gb", "3g.40gb")):
            lines.append(f"MIG {profile}     Device  {d}: (UUID: MIG-{g:04x}{d:04x}-93b4-5d7e-8f10-4a2b3c4d5e6f)")
    return "\n".join(lines) + "\n"


def test_an_unindented_listing_reads_every_gpu_and_mig_device(tmp_path: Path):
    path = tmp_path / "from-the-docs.txt"
    path.write_text(_unindented_listing(8))
    got = run_json(path)["gpus"]
    assert len(got) == 8
    assert sum(len(g["mig_devices"]) for g in got) == 4 * 3 + 4 * 2
    assert [m["profile"] for m in got[0]["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb"]


@pytest.mark.parametrize(
    "bad_line, number",
    [("Some GPU text nobody expected", 3), ("MIG 1g.10gb Device 0 (no uuid)", 3)],
)
def test_a_listing_line_the_loader_does_not_understand_is_refused_naming_it(bad_line: str, number: int):
    lines = _unindented_listing(2).splitlines()
    lines.insert(number - 1, bad_line)
    with pytest.raises(ValueError, match=rf"^line {number}: {re.escape(repr(bad_line))} is not an nvidia-smi -L line"):
        machine_from_text("\n".join(lines) + "\n", "listing.txt")


def test_a_mig_line_before_any_gpu_is_refused():
    text = "MIG 1g.10gb Device 0: (UUID: MIG-1)\n" + _unindented_listing(1)
    with pytest.raises(ValueError, match=r"^line 1: "):
        machine_from_text(text, "listing.txt")
