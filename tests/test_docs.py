"""The code blocks of the docs run: what a reader copies works."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark import cloudpickle

from sources.numbers import NumberSequenceSource
from sources.spark import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DOCS = Path(__file__).parent.parent / "docs"
_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of ``page``, in order, dedented (blocks inside lists too)."""
    return [textwrap.dedent(match.group(2)) for match in _BLOCK.finditer(page.read_text())]


def run_as_one_module(page: Path) -> types.ModuleType:
    """Run the blocks of ``page`` in order in one fresh module, as a reader would paste them.

    Spark's workers cannot import that module, so its classes are pickled by value,
    as those of a user's script are.
    """
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    cloudpickle.register_pickle_by_value(module)
    try:
        for number, block in enumerate(python_blocks(page), 1):
            code = compile(block, f"{page.name}, python block {number}", "exec")
            exec(code, module.__dict__)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules[module.__name__]
    return module


def test_the_block_finder_sees_indented_blocks() -> None:
    page = "text\n\n  ```python\n  x = 1\n  ```\n\n```python\ny = 2\n```\n"
    blocks = [textwrap.dedent(m.group(2)) for m in _BLOCK.finditer(page)]
    assert blocks == ["x = 1\n", "y = 2\n"]


@pytest.mark.spark
def test_the_connector_guide_runs_top_to_bottom(spark: SparkSession) -> None:
    page = DOCS / "connector-guide.md"
    assert len(python_blocks(page)) == page.read_text().count("```python")
    try:
        module = run_as_one_module(page)
    finally:
        register(spark, NumberSequenceSource)  # the guide registered its own under that name
    assert module.NumberSequenceSource.format_name() == "splitsource.numbers"


@pytest.mark.spark
@pytest.mark.parametrize("page", ["options.md", "streaming.md"])
def test_a_user_guide_runs_top_to_bottom(spark: SparkSession, page: str) -> None:
    """The pages whose examples need no outside system (files and Kafka pages do)."""
    path = DOCS / page
    assert python_blocks(path)
    module = run_as_one_module(path)
    assert module.spark is spark  # local_session() gave the running session back
