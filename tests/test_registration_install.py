"""An author's flat project installed with ``pip install -e .``, as the tutorial's
``pyproject.toml`` has it: Spark's lookup finds its ``pyspark_*`` module, and without the
tutorial's ``package-dir`` line the kit's registration case fails naming the fix."""

from __future__ import annotations

import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from sources.testing.registration import check_registration

SRC = Path(__file__).parent.parent / "src"

MODULE = '''"""splitsource.kitcheck in every Spark session, with no register call."""

from sources.numbers.source import NumberSequenceSource
from sources.spark import data_source_for


class KitCheckSource(NumberSequenceSource):
    name = "kitcheck"


DefaultSource = data_source_for(KitCheckSource)
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "kitcheck"
version = "0.1.0"

[tool.setuptools]
py-modules = ["pyspark_kitcheck"]
"""


def environment_with_splitsource(directory: Path) -> Path:
    """A new virtual environment (with pip) that also imports this one's packages."""
    subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
    python = directory / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    inherited = [sysconfig.get_paths()["purelib"], *site.getsitepackages(), str(SRC)]
    (Path(purelib) / "inherited.pth").write_text("\n".join(inherited) + "\n")
    return python


def install_editable(python: Path, project: Path) -> None:
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(project)], check=True
    )


@pytest.mark.slow
def test_an_editable_flat_project_is_found_by_spark_only_with_the_tutorials_package_dir(
    tmp_path: Path,
) -> None:
    project = tmp_path / "kitcheck"
    project.mkdir()
    (project / "pyspark_kitcheck.py").write_text(MODULE)
    (project / "pyproject.toml").write_text(PYPROJECT)
    python = environment_with_splitsource(tmp_path / "venv")

    install_editable(python, project)
    with pytest.raises(AssertionError) as caught:
        check_registration("splitsource.kitcheck", str(python))
    first = str(caught.value).splitlines()[0]
    assert first.startswith(
        "Spark cannot find splitsource.kitcheck: pyspark_kitcheck is installed in editable "
        "mode through an import hook"
    )
    assert 'add `package-dir = {"" = "."}` under `[tool.setuptools]`' in first

    (project / "pyproject.toml").write_text(PYPROJECT + 'package-dir = {"" = "."}\n')
    install_editable(python, project)
    # The lookup is remembered per interpreter path: ask through the venv's other name.
    assert check_registration("splitsource.kitcheck", str(python.with_name("python3"))) is None
