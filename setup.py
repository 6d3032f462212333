"""Map the root folders agent/, launcher/ and tui/ into the labgang namespace.

pyproject.toml holds the metadata; this file only computes the package list so
that a new subpackage under one of the roots is picked up without editing it.
``labgang`` itself is a namespace package (PEP 420): nothing called ``agent``
lands in site-packages.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {"labgang.agent": "agent", "labgang.launcher": "launcher", "labgang.tui": "tui"}


def _packages() -> tuple[list[str], dict[str, str]]:
    here = Path(__file__).parent
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, root in ROOTS.items():
        package_dir[name] = root
        for init in sorted((here / root).rglob("__init__.py")):
            rel = init.parent.relative_to(here / root)
            packages.append(".".join([name, *rel.parts]) if rel.parts else name)
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()
# `labgang install` reads the units and example configs; a regular (non-editable) install carries them
# under <prefix>/share/labgang (launcher/cli/install.py, source_root), so it needs no checkout.
# Every file of config/ (the example configs, config/sim/'s simulated machines) and examples/ (the
# training scripts `up`'s banner suggests) goes along too, each folder to its own share/labgang folder.
SHARED_TREES = ("config", "examples")


def _data_files() -> list[tuple[str, list[str]]]:
    files = [("share/labgang/systemd", sorted(str(p) for p in Path("systemd").iterdir() if p.is_file()))]
    for tree in SHARED_TREES:
        folders: dict[str, list[str]] = {}
        for path in sorted(Path(tree).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                folders.setdefault(f"share/labgang/{path.parent.as_posix()}", []).append(path.as_posix())
        files.extend(sorted(folders.items()))
    return files


DATA_FILES = _data_files()

setup(
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    data_files=DATA_FILES,
    package_data={
        "labgang.tui": ["*.tcss", "**/*.tcss", "web_page/*.html"],
        "labgang.launcher": ["data/*", "data/**/*"],
    },
)
