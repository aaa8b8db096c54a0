"""The benchmark commands of the docs: each names a script that takes its arguments.

A benchmark runs for minutes, so the test runs each command's script only until it has
parsed its arguments.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from test_docs import DOCS, code_blocks

_UP_TO_THEIR_ARGUMENTS = """
import argparse, contextlib, io, json, runpy, sys, traceback

class Parsed(Exception):
    pass

parse = argparse.ArgumentParser.parse_args

def parse_and_stop(self, *args, **kwargs):
    parse(self, *args, **kwargs)
    raise Parsed

argparse.ArgumentParser.parse_args = parse_and_stop
failed = []
for command in json.loads(sys.argv[1]):
    sys.argv = command
    sys.path.insert(0, command[0].rpartition("/")[0])  # as Python runs a script
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            runpy.run_path(command[0], run_name="__main__")
        said.write("the script parsed no arguments")
    except Parsed:
        continue
    except SystemExit as exit:  # argparse has said why; a script's own exit says it here
        said.write(str(exit.code))
    except BaseException:
        said.write(traceback.format_exc(limit=-3))
    finally:
        sys.path.pop(0)
    failed.append(" ".join(command) + "\\n" + said.getvalue())
print("\\n".join(failed), end="")
"""


def benchmark_commands() -> list[list[str]]:
    """The bash lines of the docs that run a script of ``benchmarks/``, as the arguments
    after the interpreter."""
    return [
        shlex.split(line)[1:]
        for page in sorted(DOCS.rglob("*.md"))
        for block in code_blocks(page.read_text(), "bash")
        for line in block.splitlines()
        if " benchmarks/" in line
    ]


def test_every_benchmark_command_of_the_docs_names_a_script_that_takes_its_arguments() -> None:
    commands = benchmark_commands()
    assert len(commands) >= 20  # the performance page's, at least
    ran = subprocess.run(
        [sys.executable, "-c", _UP_TO_THEIR_ARGUMENTS, json.dumps(commands)],
        cwd=DOCS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "", ran.stdout
