"""splitsource's version is one fact: the package's metadata, its messages and its docs agree."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import sources
from sources.version import VERSION

ROOT = Path(__file__).parent.parent


def test_the_installed_metadata_has_the_version_the_code_has() -> None:
    assert importlib.metadata.version("splitsource") == VERSION == sources.__version__


def test_no_page_names_another_version_of_splitsource() -> None:
    named = re.compile(r"splitsource[- ](\d+\.\d+(?:\.\d+)?)")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    others = [
        f"{page.relative_to(ROOT)}: splitsource {version}"
        for page in pages
        for version in named.findall(page.read_text())
        if not VERSION.startswith(version)
    ]
    assert others == []
