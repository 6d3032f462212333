"""``labgang config check`` run by a lab member on root's config, with real Unix users (``lab_users``,
tests/unix_users.py): root's cluster token, 0600 as it must be, is one the member may not read, and
that is no warning (the coordinator reads it as root); a token readable by everyone still is."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

QUEUES = '[[queues]]\nname = "default"\nnominal = { gpu = 2 }\n'


def test_roots_private_token_is_no_warning_to_a_member_who_may_not_read_it(lab_users) -> None:
    alice = lab_users[0]
    with tempfile.TemporaryDirectory(prefix="lgcheck") as folder:
        where = Path(folder)
        where.chmod(0o755)
        token = where / "cluster.token"
        token.write_text("t" * 40 + "\n")
        token.chmod(0o600)  # root's, as labgang install leaves it
        config = where / "cluster.toml"
        config.write_text(f'token_file = "{token}"\n' + QUEUES)
        config.chmod(0o644)
        done = alice.run(["config", "check", str(config)])
        assert done.returncode == 0, done.stderr
        assert "cluster config ok" in done.stdout and done.stderr == "", done.stderr
        token.chmod(0o644)
        done = alice.run(["config", "check", str(config)])
        assert done.returncode == 0, done.stderr
        assert f"warning: token_file: {token} must be readable only by its owner" in done.stderr, done.stderr
