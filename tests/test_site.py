"""The documentation site as a reader gets it: built with every warning an error, its
reference listing every exported name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import site
from helpers.reference import entries

pytestmark = pytest.mark.site


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site ``./dev test`` built from this tree before pytest, or one built now."""
    given = os.environ.get(site.BUILT_SITE_VARIABLE)
    return Path(given) if given else site.build(tmp_path_factory.mktemp("site"))


def test_every_exported_name_and_listed_member_has_an_entry_on_the_site(
    built_site: Path,
) -> None:
    """An entry's heading is on one of the reference pages, under the path the name is
    exported as or the one of the module that defines it; its members' under its own."""
    pages = (built_site / "api").glob("*/index.html")
    anchors = set().union(*(site.ids(page) for page in pages))
    missing = []
    for entry in entries():
        found = [anchor for anchor in entry.anchors if anchor in anchors]
        if not found:
            missing.append(entry.qualified)
            continue
        missing += [
            member.path
            for member in entry.members
            if f"{found[0]}.{member.obj.name}" not in anchors
        ]
    assert missing == [], "not on the reference pages: add their modules to docs/api/*.md"
