"""Java, Maven and the jar files of the test broker and of Spark's own Kafka connector, and where they live.

The jars come from Maven Central through the poms under ``conf/`` (``REPO_ROOT / "conf"``) and live in ``.kafka``
(git-ignored) unless ``SKS_KAFKA_HOME`` says otherwise; a missing tool is a :class:`ToolMissingError` whose message
says what to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

__all__ = [
    "ToolMissingError",
    "REPO_ROOT",
    "CONF_DIR",
    "MIN_JAVA",
    "SPARK_CONNECTOR_ARTIFACTS",
    "kafka_home",
    "broker_lib",
    "spark_connector_jars",
    "fetch_jars",
    "require_java",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
MIN_JAVA = 17
# The artifacts of Spark's Kafka connector that pyspark does not already ship.
SPARK_CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)


class ToolMissingError(RuntimeError):
    """Java or Maven is missing or too old; the message says what to install."""


def kafka_home() -> Path:
    """Where the fetched jars live (``.kafka`` in the repo unless ``SKS_KAFKA_HOME`` says otherwise)."""
    return Path(os.environ.get("SKS_KAFKA_HOME", REPO_ROOT / ".kafka"))


def broker_lib() -> Path:
    return kafka_home() / "lib"


def spark_connector_jars() -> list[Path]:
    """The jar files of Spark's own ``format("kafka")`` connector, for ``spark.jars``."""
    return sorted((kafka_home() / "spark-jars").glob("*.jar"))


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ToolMissingError(
            f"Java {MIN_JAVA}+ is needed to run the Kafka broker and was not found on PATH: "
            "install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise ToolMissingError(
            f"Java {MIN_JAVA}+ is needed to run the Kafka broker, found {major or 'an unknown version'} at {java}: "
            "install openjdk-17-jre-headless (or newer) and put it first on PATH."
        )
    return java


def _require_maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ToolMissingError(
            "Maven is needed to fetch the Kafka broker jars from Maven Central and was not found on PATH: "
            "install it (Debian/Ubuntu: apt-get install maven)."
        )
    return mvn


def _copy_dependencies(pom: Path, dest: Path, include: Sequence[str] = ()) -> None:
    if dest.is_dir() and any(dest.glob("*.jar")):
        return
    mvn = _require_maven()
    staging = Path(tempfile.mkdtemp(prefix=dest.name + "-", dir=dest.parent))
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={staging}"]
    if include:
        cmd.append("-DincludeArtifactIds=" + ",".join(include))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ToolMissingError(f"Maven could not fetch the jars of {pom}:\n{tail}")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)  # atomic: a half-copied folder is never mistaken for a complete one


def fetch_jars() -> None:
    """Copy the broker's and Spark's Kafka connector's jars from Maven Central, once."""
    require_java()
    kafka_home().mkdir(parents=True, exist_ok=True)
    _copy_dependencies(CONF_DIR / "kafka" / "pom.xml", broker_lib())
    _copy_dependencies(CONF_DIR / "spark" / "pom.xml", kafka_home() / "spark-jars", SPARK_CONNECTOR_ARTIFACTS)
