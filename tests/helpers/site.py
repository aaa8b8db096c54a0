"""The documentation site, built as ``./dev docs`` builds it (``mkdocs build``, whose
configuration, mkdocs.yml, makes every warning an error), and what its pages hold."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent
CONFIG = ROOT / "mkdocs.yml"
BUILT_SITE_VARIABLE = "SPLITSOURCE_BUILT_SITE"
"""Set by ``./dev test`` to the site it built from this tree before pytest, so that the
tests read that one instead of building it again."""

_ID = re.compile(r'\bid="([^"]+)"')


def build(site: Path) -> Path:
    """Build the site into ``site``; a warning (a broken link, a reference that does not
    resolve) fails the build, with mkdocs' output in the error."""
    # Not --quiet: mkdocs then drops the warnings before --strict counts them.
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    command += ["--config-file", str(CONFIG), "--site-dir", str(site)]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's notice of its successor
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}{result.stderr}"
    return site


def page(site: Path, source: str) -> Path:
    """The HTML file that ``docs/<source>`` (such as ``api/sources.md``) becomes."""
    stem = source.removesuffix(".md")
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def ids(html: Path) -> set[str]:
    """The ``id`` of every element of a page: the anchors links can point at."""
    return set(_ID.findall(html.read_text()))
