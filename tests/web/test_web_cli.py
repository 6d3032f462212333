"""``labgang top --web``'s options: bad combinations and values are refused with exit 2, naming the option."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def top(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "top", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "9000"], "--port: only with --web"),
        (["--host", "10.0.0.1", "--token-file", "/x"], "--host, --token-file: only with --web"),
        (["--web", "--once"], "--web and --once: choose one"),
        (["--web", "--host", "192.0.2.10"], "--host 192.0.2.10: serving beyond loopback needs a read token"),
        (["--web", "--port", "0"], "--port: 0 is not in the range 1<=x<=65535"),
    ],
)
def test_refused_with_the_option_named(args: list[str], message: str, tmp_path: Path) -> None:
    out = top("--state-dir", str(tmp_path), *args)
    assert out.returncode == 2, out
    assert message in out.stderr, out.stderr


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-token-s3cret-token\n")
    token.chmod(0o644)
    out = top("--state-dir", str(tmp_path), "--web", "--token-file", str(token))
    assert out.returncode == 2 and "--token-file" in out.stderr, out.stderr
