"""docs/install.md, as a user runs it: a wheel built from the checkout installs into a clean
virtual environment, which then reads a packaged format with no code."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_docs import DOCS, code_blocks

ROOT = Path(__file__).parent.parent
RUNTIME = ("pyspark", "pyarrow", "numpy", "pandas", "fsspec")
"""splitsource's dependencies, installed into the clean environment beforehand from the
installer's cache, so that the page's ``pip install`` installs the wheel alone."""


def copy_checkout(target: Path) -> Path:
    """The repository's files (tracked, and new ones not ignored), as a fresh checkout has them."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def clean_environment(home: Path) -> dict[str, str]:
    """A shell's environment without this test run's: no virtual environment on ``PATH``,
    no ``PYTHONPATH``, ``python3`` the interpreter this environment was made from."""
    bin_dir = home / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    kept = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "JAVA", "SSL_", "LANG"))}
    return {**kept, "HOME": os.environ["HOME"], "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"}


def preinstall_dependencies(environment: Path) -> None:
    """The page's environment, made ahead with :data:`RUNTIME` in it (by uv without pip:
    the page's own ``python3 -m venv`` adds pip).

    uv installs them from its cache alone first: asked the index, it finds pyspark's
    source archive changed and builds its wheel again (30 to 60 s on two cores)."""
    python = getattr(sys, "_base_executable", sys.executable)
    target = str(environment / "bin" / "python")
    pinned = [f"{name}=={importlib.metadata.version(name)}" for name in RUNTIME]
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        subprocess.run([python, "-m", "venv", str(environment)], check=True)
        subprocess.run([target, "-m", "pip", "install", "--quiet", *pinned], check=True)
        return
    subprocess.run([python, "-m", "venv", "--without-pip", str(environment)], check=True)
    installer = [uv, "pip", "install", "--quiet", "--python", target]
    if subprocess.run([*installer, "--offline", *pinned], capture_output=True).returncode:
        subprocess.run([*installer, *pinned], check=True)  # not all cached: from the index


@pytest.mark.spark
@pytest.mark.slow
def test_a_wheel_of_the_checkout_installs_into_a_clean_environment_that_reads_with_no_code(
    tmp_path: Path,
) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    preinstall_dependencies(checkout / "app-env")
    install, check = code_blocks((DOCS / "install.md").read_text(), "bash")

    ran = subprocess.run(
        ["bash", "-euc", install + check],
        cwd=checkout,
        env=clean_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().splitlines()[-1] == "10", ran.stdout[-2000:]
    assert list((checkout / "dist").glob("splitsource-*.whl"))
