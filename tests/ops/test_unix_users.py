"""The real-user fixture itself: each user is a distinct real uid with a login's environment, and runs
this checkout's labgang through the shared interpreter."""

from __future__ import annotations


def test_each_user_is_a_real_uid_with_a_login_environment_only(lab_users):
    first, second = lab_users
    assert first.user.uid != second.user.uid
    for shell in lab_users:
        done = shell.run_argv(["sh", "-c", "id -u; echo $HOME; env | grep -c '^LABGANG_' || true"])
        assert done.returncode == 0, done.stderr
        uid, home, labgang_vars = done.stdout.split()
        assert (int(uid), home, labgang_vars) == (shell.user.uid, str(shell.user.home), "0")


def test_each_user_runs_labgang_from_the_shared_interpreter(lab_users):
    for shell in lab_users:
        done = shell.run(["--help"])
        assert done.returncode == 0, done.stderr
        assert "submit" in done.stdout
        imported = shell.run_argv([str(shell.python), "-c", "import labgang.launcher, os; print(os.getuid())"])
        assert imported.stdout.strip() == str(shell.user.uid), imported.stderr
