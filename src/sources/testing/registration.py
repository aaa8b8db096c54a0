"""The kit's check that Spark finds a connector with no ``register`` call.

A session registers, at its first Python data source call, the ``DefaultSource`` of
every ``pyspark_*`` module that :func:`pkgutil.iter_modules` lists in its Python
workers' interpreter. An import hook does not list its modules there: current
setuptools installs a flat project in editable mode (``pip install -e .``, ``uv pip
install -e .``) through one, so the module imports but Spark never finds the format
(``DATA_SOURCE_NOT_FOUND``). :func:`check_registration` looks the way Spark does, in
a fresh process of that interpreter, and names the fix when the module is hidden.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

__all__ = ["check_registration", "workers_python"]

_LOOKUP = textwrap.dedent(
    """
    import glob, importlib, json, os, pkgutil, re, sys

    def format_of(name):
        source = getattr(importlib.import_module(name), "DefaultSource", None)
        return source.name() if source is not None and hasattr(source, "name") else None

    found, broken, hooked = {}, {}, {}
    for info in pkgutil.iter_modules():
        if info.name.startswith("pyspark_"):
            try:
                found[info.name] = format_of(info.name)
            except Exception as error:
                broken[info.name] = f"{type(error).__name__}: {error}"
    for entry in filter(os.path.isdir, sys.path):
        for finder in glob.glob(os.path.join(entry, "__editable__*finder.py")):
            with open(finder, encoding="utf-8") as text:
                names = set(re.findall(r"'(pyspark_[A-Za-z0-9_]+)'", text.read()))
            for name in names - set(found):
                try:
                    hooked[name] = [format_of(name), finder]
                except Exception as error:
                    broken[name] = f"{type(error).__name__}: {error}"
    print(json.dumps({"found": found, "broken": broken, "hooked": hooked}))
    """
)
"""What Spark's data source lookup (``pyspark.sql.worker.lookup_data_sources``) does, and
the ``pyspark_*`` modules that editable installs' import hooks hide from it."""

_FIX = (
    'add `package-dir = {"" = "."}` under `[tool.setuptools]` in pyproject.toml (setuptools '
    "then installs the project's directory as a path that Spark lists) and install again; or "
    "install with `--config-settings editable_mode=compat`, or without `-e`"
)


def workers_python() -> str:
    """The interpreter of Spark's Python workers: ``PYSPARK_PYTHON``, else this one."""
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


@functools.cache
def _lookup(python: str) -> dict[str, Any]:
    """What Spark's lookup finds in a fresh ``python``, run outside any project directory
    and without ``PYTHONPATH`` (which a cluster's workers do not share)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(
            [python, "-c", _LOOKUP],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise AssertionError(f"looking for pyspark_* modules in {python} failed: {done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def _registering_here(format_name: str) -> list[str]:
    """The ``pyspark_*`` modules this process can import (test paths included) whose
    ``DefaultSource`` serves ``format_name``."""
    modules = []
    for info in pkgutil.iter_modules():
        if not info.name.startswith("pyspark_"):
            continue
        try:
            source = getattr(importlib.import_module(info.name), "DefaultSource", None)
        except Exception:  # a broken module is the lookup's finding, not this one's
            continue
        if source is not None and getattr(source, "name", lambda: None)() == format_name:
            modules.append(info.name)
    return modules


def check_registration(format_name: str, python: str | None = None) -> str | None:
    """Fail unless Spark's lookup in ``python`` (Spark's workers' interpreter) finds
    ``format_name`` when a ``pyspark_*`` module installed there registers it; the reason to
    skip when none is installed (sessions then call ``register``, or the project is not
    installed yet).

    Raises
    ------
    AssertionError
        With the cause and the fix on its first line: the module is hidden by an editable
        install's import hook, or a ``pyspark_*`` module fails to import (which breaks
        Spark's lookup of every Python data source).
    """
    python = python or workers_python()
    seen = _lookup(python)
    if seen["broken"]:
        name, error = next(iter(seen["broken"].items()))
        raise AssertionError(
            f"{name} fails to import in {python} ({error}): Spark imports every pyspark_* "
            "module in one pass, so no Python data source of that environment is found. Keep "
            "the module importable when an optional dependency is missing."
        )
    if format_name in seen["found"].values():
        return None
    hooked = [
        (name, finder) for name, (fmt, finder) in seen["hooked"].items() if fmt == format_name
    ]
    if hooked:
        name, finder = hooked[0]
        raise AssertionError(
            f"Spark cannot find {format_name}: {name} is installed in editable mode through an "
            f"import hook ({os.path.basename(finder)}), which Spark's lookup of pyspark_* "
            f"modules does not see, so load() fails with DATA_SOURCE_NOT_FOUND. Fix: {_FIX}."
        )
    here = _registering_here(format_name)
    if here:
        return (
            f"{here[0]} registers {format_name} on this test's path but is not installed in "
            f"{python}, the interpreter of Spark's Python workers: install the project there "
            "(`pip install -e .`) for sessions to find it, then this case checks that they do"
        )
    return (
        f"no pyspark_* module registers {format_name}: sessions must call register(spark, "
        "<source class>) (see 'Registration without code' in the connector guide)"
    )
