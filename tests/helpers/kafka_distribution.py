"""A directory laid out as Apache Kafka's binary distribution, so that the shell commands
of docs/kafka.md run as a user runs them in theirs.

The distribution's scripts each run one Java class from ``libs/`` through
``bin/kafka-run-class.sh``; here each runs the same class of the same Kafka
release (4.3.1, the jars from Maven Central of :mod:`helpers.maven`). What
differs is the JVM's settings (a smaller heap, C1 and a serial GC, as the test
broker of :mod:`helpers.kafka_broker`) and logging (warnings only, on standard
error as the distribution's tools log, so that ``$(bin/kafka-storage.sh
random-uuid)`` is the id alone). Only the
scripts the docs use exist.

Example::

    home = kafka_distribution(tmp_path / "kafka")
    subprocess.run(["bin/kafka-storage.sh", "random-uuid"], cwd=home, check=True)
"""

from __future__ import annotations

from pathlib import Path

from helpers.maven import kafka_broker_jars, kafka_tools_jars

__all__ = ["SCRIPTS", "kafka_distribution"]

SCRIPTS = {
    "kafka-storage.sh": "kafka.tools.StorageTool",
    "kafka-server-start.sh": "kafka.Kafka",
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
}
"""The distribution's scripts that the docs use, and the class each runs."""

_RUN_CLASS = """\
#!/bin/sh
# Runs a class of libs/ with java, as the distribution's script of this name does.
home="$(cd "$(dirname "$0")/.." && pwd)"
exec java -Xmx512m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \\
    -Dlog4j2.configurationFile="$home/config/log4j2.properties" -cp "$home/libs/*" "$@"
"""

_SCRIPT = """\
#!/bin/sh
exec "$(dirname "$0")/kafka-run-class.sh" {main} "$@"
"""

_LOG4J = """\
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
"""


def kafka_distribution(home: Path) -> Path:
    """Lay out ``home`` (created if missing) as the distribution: ``bin/`` with
    :data:`SCRIPTS` and ``kafka-run-class.sh``, ``libs/`` linking Kafka's jars,
    ``config/log4j2.properties``. Returns ``home``."""
    bin_, libs, config = home / "bin", home / "libs", home / "config"
    for directory in (bin_, libs, config):
        directory.mkdir(parents=True, exist_ok=True)
    for jar in [*kafka_broker_jars(), *kafka_tools_jars()]:
        link = libs / jar.name
        if not link.exists():
            link.symlink_to(jar)
    (config / "log4j2.properties").write_text(_LOG4J)
    scripts = {"kafka-run-class.sh": _RUN_CLASS}
    scripts.update({name: _SCRIPT.format(main=main) for name, main in SCRIPTS.items()})
    for name, text in scripts.items():
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    return home
