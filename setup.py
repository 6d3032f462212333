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
DATA_FILES = [
    ("share/labgang/systemd", sorted(str(p) for p in Path("systemd").iterdir() if p.is_file())),
    ("share/labgang/config", ["config/cluster.toml", "config/agent.toml"]),
]

setup(
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    data_files=DATA_FILES,
    package_data={
        "labgang.tui": ["*.tcss", "**/*.tcss", "web_page/*.html"],
        "labgang.launcher": ["data/*", "data/**/*"],
    },
)
