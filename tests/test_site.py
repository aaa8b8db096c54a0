"""The documentation site as a reader gets it: built with every warning an error, its
reference listing every exported name, and its pages, opened in headless Chromium,
showing the navigation and highlighted code with the buttons the site's script adds."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import yaml

from helpers import site
from helpers.reference import entries

pytestmark = pytest.mark.site


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site ``./dev test`` built from this tree before pytest, or one built now."""
    given = os.environ.get(site.BUILT_SITE_VARIABLE)
    return Path(given) if given else site.build(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def served(built_site: Path) -> Iterator[str]:
    """The site served over HTTP on loopback, as a reader's browser loads it (the copy
    buttons need a page from a server, not a file), as its root URL."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}/"
        server.shutdown()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "no chromium on PATH: ./dev test installs Debian's chromium package"
    return found


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


def test_the_reference_shows_no_sphinx_role_as_written(built_site: Path) -> None:
    """The docstrings' roles (``:class:`Source```) become code, linked where the reference
    has the name (docs/hooks/sphinx_roles.py), not text such as ``:class:Source``."""
    shown = [
        f"{page.parent.name}: {role.group()}"
        for page in (built_site / "api").glob("*/index.html")
        for role in re.finditer(
            r":(?:attr|class|data|exc|func|meth|mod|obj):(?:<code>|`)\S+", page.read_text()
        )
    ]
    assert shown == []


@pytest.mark.browser
def test_the_home_page_shows_every_page_and_section_in_its_navigation(
    served: str, chromium: str
) -> None:
    navigation = Navigation.of(rendered(chromium, served), served)
    for section, title, page in listed_pages():
        assert section is None or section in navigation.sections
        assert navigation.links.get(title) == urljoin(served, site_path(page)), title


@pytest.mark.browser
def test_a_guide_shows_its_code_highlighted_with_a_copy_button(served: str, chromium: str) -> None:
    blocks = code_blocks(rendered(chromium, urljoin(served, "files/")))
    assert blocks and all(block.copy_button for block in blocks), "the site's script did not run"
    (example, *_) = [block for block in blocks if "from sources.files import" in block.text]
    assert {"kn", "nn"} <= example.tokens, "no Python highlighting (import, a module name)"


def rendered(chromium: str, url: str) -> str:
    """The page's DOM once its scripts ran, as headless Chromium dumps it (with a profile
    of its own, so that parallel tests do not share one)."""
    with tempfile.TemporaryDirectory() as profile:
        command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        command += [f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", url]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "</html>" in result.stdout, result.stderr[-3000:]
    return result.stdout


def listed_pages() -> Iterator[tuple[str | None, str, str]]:
    """(section, title, page) of each page in mkdocs.yml's ``nav``, at any depth."""
    return _pages_in(yaml.safe_load(site.CONFIG.read_text())["nav"], None)


def _pages_in(
    items: list[dict[str, Any]], section: str | None
) -> Iterator[tuple[str | None, str, str]]:
    for item in items:
        ((title, value),) = item.items()
        if isinstance(value, str):
            yield section, title, value
        else:
            yield from _pages_in(value, title)


def site_path(page: str) -> str:
    """The URL path, from the site's root, of ``docs/<page>``."""
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):  # a folder's index page is the folder
        return stem.removesuffix("index")
    return f"{stem}/"


class Navigation(HTMLParser):
    """The primary navigation of a page: its section titles, and its links by text."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.sections: set[str] = set()
        self.links: dict[str, str] = {}
        self._depth = 0  # of nav elements, once inside the primary one
        self._open: tuple[str, str] | None = None  # a link or section label being read
        self._text: list[str] = []

    @classmethod
    def of(cls, dom: str, url: str) -> Navigation:
        """The navigation of the page at ``url``, its links resolved against it."""
        navigation = cls(url)
        navigation.feed(dom)
        return navigation

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "nav" and (self._depth or "md-nav--primary" in classes):
            self._depth += 1
        elif self._depth and "md-nav__link" in classes and tag in ("a", "label"):
            self._open = (tag, dict(attrs).get("href") or "")
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self._depth:
            self._depth -= 1
        elif self._open and tag == self._open[0]:
            text = " ".join("".join(self._text).split())
            if tag == "label":
                self.sections.add(text)
            else:
                self.links[text] = urljoin(self.url, self._open[1])
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open:
            self._text.append(data)


@dataclass
class CodeBlock:
    """A ``pre`` element: its text, the classes of its tokens, and whether the site's
    script gave it a copy button."""

    text: str = ""
    tokens: set[str] = field(default_factory=set)
    copy_button: bool = False


def code_blocks(dom: str) -> list[CodeBlock]:
    parser = _CodeBlocks()
    parser.feed(dom)
    return parser.blocks


class _CodeBlocks(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[CodeBlock] = []
        self._block: CodeBlock | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self._block = CodeBlock()
            self.blocks.append(self._block)
        elif (
            self._block is not None
            and tag == "button"
            and dict(attrs).get("data-md-type") == "copy"
        ):
            self._block.copy_button = True
        elif self._block is not None and tag == "span":
            self._block.tokens.update((dict(attrs).get("class") or "").split())

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._block = None

    def handle_data(self, data: str) -> None:
        if self._block is not None:
            self._block.text += data


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass
