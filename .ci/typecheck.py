"""Run mypy over the installed package names (labgang.agent, ...) with errors located in the real files.

setup.py maps the folders agent/, launcher/ and tui/ to ``labgang.agent`` etc. (``package-dir``), and
mypy cannot follow that mapping: ``mypy agent`` names the modules ``agent.*`` (so the code's own
``labgang.agent`` imports do not resolve), and ``mypy -p labgang.agent`` cannot see an editable
install. This script hands mypy each file with its installed module name, so the per-module settings
in pyproject.toml ([tool.mypy], keyed on ``labgang.*``) apply and every error names ``agent/...``.

Test files are named ``tests.<folder>.<file>``; the tests' helper modules (``harness``,
``sched_builders``, ...) are imported by their bare name (pytest's ``pythonpath`` in
pyproject.toml puts their folders on the path), so they are checked under that name.

Why a driver and not only ``[tool.mypy]``: mypy maps files to modules by folder names
(``files``/``mypy_path``), and no option maps a folder to another package name the way
setuptools' ``package-dir`` does, so the mapping is computed here (from setup.py's ROOTS).

Usage: ``python .ci/typecheck.py [mypy options]``; exit status 1 when mypy reports an error.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

REPO = Path(__file__).resolve().parent.parent


def package_roots() -> dict[str, str]:
    """``ROOTS`` from setup.py (installed package name -> folder), read without running setup()."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ROOTS" for t in node.targets):
            roots: dict[str, str] = ast.literal_eval(node.value)
            return roots
    raise SystemExit("setup.py: no ROOTS mapping found")


def _module(prefix: list[str], rel: Path) -> str:
    parts = [*prefix, *rel.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> list[BuildSource]:
    """Every .py file of the packages and tests, with the module name it is imported under."""
    out: list[BuildSource] = []
    for package, folder in package_roots().items():
        for path in sorted((REPO / folder).rglob("*.py")):
            out.append(
                BuildSource(str(path.relative_to(REPO)), _module(package.split("."), path.relative_to(REPO / folder)))
            )
    for path in sorted((REPO / "tests").rglob("*.py")):
        rel = path.relative_to(REPO)
        is_test = path.name.startswith("test_") or path.name == "conftest.py"
        out.append(BuildSource(str(rel), _module([], rel) if is_test else path.stem))
    return out


def main(argv: list[str]) -> int:
    # "-c pass" only satisfies process_options' need for a target; the real targets are sources().
    _, options = process_options(["-c", "pass", *argv])
    try:
        result = build.build(sources(), options, stdout=sys.stdout, stderr=sys.stderr)
    except CompileError as exc:
        print("\n".join(exc.messages))
        return 2
    for line in result.errors:
        print(line)
    files = {line.split(":", 1)[0] for line in result.errors if ": error:" in line}
    errors = sum(": error:" in line for line in result.errors)
    print(f"Found {errors} errors in {len(files)} files" if errors else "Success: no issues found")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
