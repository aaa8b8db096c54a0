"""The code blocks of the docs run: what a reader copies works."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
import types
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark import cloudpickle

from helpers import option_tables, reference_glance
from helpers.jobs import job_env
from sources.numbers.source import NumberSequenceSource
from sources.spark import register
from sources.spark.partitions import arrow_schema
from sources.testing import parse_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DOCS = Path(__file__).parent.parent / "docs"
_BLOCK = r"^([ \t]*)```{language}\n(.*?)^\1```$"


def code_blocks(text: str, language: str = "python") -> list[str]:
    """The ```<language> blocks of ``text``, in order, dedented (blocks inside lists too)."""
    block = re.compile(_BLOCK.format(language=language), re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(match.group(2)) for match in block.finditer(text)]


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of ``page``."""
    return code_blocks(page.read_text())


def run_as_one_module(*pages: Path) -> types.ModuleType:
    """Run the blocks of ``pages`` in order in one fresh module, as a reader would paste
    them (a guide split into pages that read in order: the blocks of a page use the names
    of the pages before it).

    Spark's workers cannot import that module, so its classes are pickled by value,
    as those of a user's script are.
    """
    module = types.ModuleType(f"docs_{pages[0].stem.replace('-', '_')}")
    sys.modules[module.__name__] = module
    cloudpickle.register_pickle_by_value(module)
    try:
        for page in pages:
            for number, block in enumerate(python_blocks(page), 1):
                code = compile(block, f"{page.name}, python block {number}", "exec")
                exec(code, module.__dict__)
    finally:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules[module.__name__]
    return module


@pytest.mark.parametrize("table", option_tables.TABLES, ids=lambda table: table.name)
def test_an_option_table_is_the_one_its_declarations_give(table: option_tables.Table) -> None:
    assert option_tables.in_page(table) == option_tables.render(table), (
        f"the {table.name} option table of docs/{table.page} differs from the declared "
        f"options; regenerate it with: {option_tables.REGENERATE}"
    )


@pytest.mark.parametrize("glance", reference_glance.GLANCES, ids=lambda glance: glance.name)
def test_a_reference_page_lists_what_it_documents_readably_in_the_repository(
    glance: reference_glance.Glance,
) -> None:
    assert reference_glance.in_page(glance) == reference_glance.render(glance), (
        f"the list atop docs/api/{glance.name}.md differs from the code's exports and "
        f"docstrings; regenerate it with: {reference_glance.REGENERATE}"
    )


def test_the_block_finder_sees_indented_blocks() -> None:
    page = "text\n\n  ```python\n  x = 1\n  ```\n\n```python\ny = 2\n```\n```bash\nz\n```\n"
    assert code_blocks(page) == ["x = 1\n", "y = 2\n"]
    assert code_blocks(page, "bash") == ["z\n"]


CONNECTOR_GUIDE = [
    DOCS / "connector-guide.md",
    DOCS / "connector-contracts.md",
    DOCS / "connector-streaming.md",
    DOCS / "connector-testing.md",
]


@pytest.mark.spark
def test_the_connector_guide_runs_top_to_bottom(spark: SparkSession) -> None:
    """Its four pages, in the order of the site's navigation, as one module."""
    for page in CONNECTOR_GUIDE:
        assert len(python_blocks(page)) == page.read_text().count("```python"), page.name
    try:
        module = run_as_one_module(*CONNECTOR_GUIDE)
    finally:
        register(spark, NumberSequenceSource)  # the guide registered its own under that name
    assert module.NumberSequenceSource.format_name() == "splitsource.numbers"


_FILE_HEADER = re.compile(r"^# ([\w./-]+\.(?:py|toml))\n")


def tutorial_project(text: str) -> tuple[dict[str, str], list[str]]:
    """The tutorial's files (its blocks headed ``# <path>``, joined in order) and the
    Python blocks of its session, in order."""
    files: dict[str, str] = {}
    session = []
    for block in code_blocks(text) + code_blocks(text, "toml"):
        header = _FILE_HEADER.match(block)
        if header is None:
            session.append(block)
        else:
            path = header.group(1)
            files[path] = files.get(path, "") + block[header.end() :]
    return files, session


@pytest.mark.spark
def test_the_tutorial_builds_a_project_that_runs_and_passes_its_tests(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tutorial's files are written into a fresh project; its session blocks run there
    in order (the Spark workers get its modules by value, as a script's); its pyproject
    lists its modules; its shell block runs there: the line with ``-m "not spark"`` as
    written, the full run only collected (the packaged ``splitsource.sqlite``, built on
    the same base, runs every case of the suite in ``test_sqlite_conformance.py``)."""
    text = (DOCS / "tutorial.md").read_text()
    assert len(code_blocks(text)) == text.count("```python")
    files, session = tutorial_project(text)
    assert sorted(files) == [
        "orders.py",
        "pyproject.toml",
        "pyspark_orders.py",
        "shop.py",
        "tests/test_orders.py",
    ]
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules = [importlib.import_module(name) for name in ("shop", "orders")]
    for module in modules:
        cloudpickle.register_pickle_by_value(module)
    namespace: dict[str, object] = {"__name__": "docs_tutorial"}
    try:
        for number, block in enumerate(session, 1):
            exec(compile(block, f"tutorial.md, session block {number}", "exec"), namespace)
        registration = importlib.import_module("pyspark_orders")
        assert registration.DefaultSource.name() == "splitsource.orders"
    finally:
        for module in modules:
            cloudpickle.unregister_pickle_by_value(module)
        for name in ("shop", "orders", "pyspark_orders"):
            sys.modules.pop(name, None)
    project = tomllib.loads(files["pyproject.toml"])
    for module in project["tool"]["setuptools"]["py-modules"]:
        assert (tmp_path / f"{module}.py").is_file(), module
    (commands,) = code_blocks(text, "bash")[-1:]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    for line in commands.splitlines():
        command = shlex.split(line, comments=True)
        assert command[:3] == ["python", "-m", "pytest"], line
        runs = "not spark" in command
        command = [sys.executable, *command[1:], "-p", "no:cacheprovider"]
        if not runs:
            command.append("--collect-only")
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        summary = result.stdout.strip().splitlines()[-1]
        assert re.search(r"\d+ passed" if runs else r"\d+ tests collected", summary), summary
        assert not re.search("failed|error", summary), summary


@pytest.mark.spark
@pytest.mark.parametrize(
    "page",
    [
        "options.md",
        "streaming.md",
        "files.md",
        "files-streaming.md",
        "files-options.md",
        "monitoring.md",
        "troubleshooting.md",
    ],
)
def test_a_user_guide_runs_top_to_bottom(spark: SparkSession, page: str) -> None:
    """The pages whose examples need no outside system (the Kafka pages run in
    test_docs_kafka.py, against the broker kafka.md starts)."""
    path = DOCS / page
    assert python_blocks(path)
    module = run_as_one_module(path)
    assert module.spark is spark  # local_session() gave the running session back


UNACTIVATED = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    try:
        spark.read.format("splitsource.files").option("format", "text").load(sys.argv[1])
    except Exception as error:
        print("ERROR " + " ".join(str(error).split()))
    from sources.files.source import FileSource
    from sources.spark import register

    register(spark, FileSource)
    rows = spark.read.format("splitsource.files").option("format", "text").load(sys.argv[1])
    print("AFTER REGISTER", rows.count())
    """
)


@pytest.mark.spark
def test_the_troubleshooting_page_says_what_an_unactivated_environment_gives(
    tmp_path: Path,
) -> None:
    """A virtual environment's Python run by its path, with another ``python3`` first on
    PATH and PYSPARK_PYTHON unset: a packaged format is not found, with the page's
    message, and ``register`` (one of the page's fixes) reads it."""
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    other = tmp_path / "bin"
    other.mkdir()
    (other / "python3").symlink_to(sys._base_executable)  # the venv's base: no splitsource
    env = {
        key: value
        for key, value in job_env().items()
        if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    }
    env["PATH"] = os.pathsep.join([str(other), "/usr/bin", "/bin"])
    found = subprocess.run([other / "python3", "-c", "import sources"], env=env, check=False)
    if found.returncode == 0:
        pytest.skip("the base interpreter has splitsource too")
    result = subprocess.run(
        [sys.executable, "-c", UNACTIVATED, str(tmp_path / "a.txt")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    page = (DOCS / "troubleshooting.md").read_text()
    (said, *_) = code_blocks(page, "text")
    assert said.strip() in result.stdout, result.stdout + result.stderr[-3000:]
    assert "AFTER REGISTER 2" in result.stdout, result.stderr[-3000:]


@pytest.mark.cluster
@pytest.mark.connect
def test_the_deploying_page_starts_servers_its_python_blocks_use(tmp_path: Path) -> None:
    """Each shell block after the first starts a server: it runs after the first (the
    environment) in a shell whose PATH starts with this environment, as an activated
    virtual environment's would; once the ports it names listen, the Python block after it
    runs as a program of its own; then the server is stopped."""
    text = (DOCS / "deploying.md").read_text()
    environment, *servers = code_blocks(text, "bash")
    programs = code_blocks(text)
    assert len(servers) == len(programs) == 2
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    env = dict(job_env(), PATH=path)
    for server, program in zip(servers, programs, strict=True):
        ports = [int(port) for port in re.findall(r"(?:port[ =]|:)(\d{4,5})\b", server)]
        shell = subprocess.Popen(
            ["bash", "-c", f"{environment}{server}wait\n"],
            cwd=tmp_path,
            env=env,
            start_new_session=True,
        )
        try:
            wait_until_listening(ports, shell, tmp_path)
            command = [sys.executable, "-c", program]
            result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr[-4000:]
        finally:
            os.killpg(shell.pid, signal.SIGTERM)
            shell.wait(60)


def wait_until_listening(ports: list[int], shell: subprocess.Popen[bytes], logs: Path) -> None:
    deadline = time.monotonic() + 120
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                tails = {log.name: log.read_text()[-2000:] for log in logs.glob("*.log")}
                assert shell.poll() is None and time.monotonic() < deadline, tails
                time.sleep(0.2)


def test_the_guides_type_table_is_the_conversion_spark_expects() -> None:
    text = (DOCS / "connector-contracts.md").read_text()
    table = text[text.index("| Spark type (DDL) | Arrow type |") :].split("\n\n")[0]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    pairs = {spark.strip().strip("`"): arrow.strip().strip("`") for spark, arrow in rows}
    assert len(pairs) == 16
    for ddl, arrow in pairs.items():
        assert str(arrow_schema(parse_ddl(f"c {ddl}")).field("c").type) == arrow, ddl


def test_the_install_page_names_every_extra_users_install() -> None:
    project = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())
    extras = set(project["project"]["optional-dependencies"]) - {"dev", "docs"}
    page = (DOCS / "install.md").read_text()
    assert [extra for extra in sorted(extras) if f"`{extra}`" not in page] == []
