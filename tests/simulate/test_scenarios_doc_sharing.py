"""docs/scenarios.md's `[sharing]` says what `mps` does as the code has it: default `false`, and
`true` is what allows `--mps`."""

from __future__ import annotations

import re
from pathlib import Path

from labgang.launcher.model import GpuSharing

DOC = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


def test_the_sharing_mps_row_says_true_allows_mps_and_the_default_is_false():
    section = DOC.read_text().split("## `[sharing]`", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    assert GpuSharing().mps is False
    assert "default `false`; `true` allows `--mps`" in text
    assert not re.search(r"`false`: `--mps` allowed", text)
