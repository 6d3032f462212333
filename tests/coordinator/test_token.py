"""The cluster token file: created owner-only when missing, refused when others may read it."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.config import AgentConfigError
from labgang.agent.token import TokenError, read_token
from labgang.launcher.coordinator.app import load_token


def test_missing_token_is_created_owner_only_and_shared_with_the_agent(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "cluster.token"
    token = load_token(path)
    assert len(token) >= 32 and path.stat().st_mode & 0o777 == 0o600
    assert read_token(path) == token == load_token(path)


def test_a_token_others_may_read_is_refused_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "cluster.token"
    path.write_text("secret\n")
    path.chmod(0o644)
    with pytest.raises(TokenError, match="readable only by its owner"):
        load_token(path)
    with pytest.raises(AgentConfigError, match=r"token_file: .* must be readable only by its owner"):
        read_token(path)


def test_agent_without_a_token_file_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match="does not exist"):
        read_token(tmp_path / "missing")


def test_a_token_file_of_random_bytes_is_refused_naming_the_file_on_both_sides(tmp_path: Path) -> None:
    path = tmp_path / "cluster.token"
    path.write_bytes(bytes(range(200, 256)) * 40)
    path.chmod(0o600)
    with pytest.raises(TokenError, match=f"^{path}: the cluster token has a byte that is not ASCII text at offset 0"):
        load_token(path)
    with pytest.raises(AgentConfigError, match=f"^token_file: {path} has a byte that is not ASCII text at offset 0"):
        read_token(path)
