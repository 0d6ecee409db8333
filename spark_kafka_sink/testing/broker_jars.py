"""Java, Maven and the jar files of the test broker and of Spark's own Kafka connector, and where they live.

The jars come from Maven Central through the poms under ``conf/`` (``REPO_ROOT / "conf"``) and live in ``.kafka``
(git-ignored) unless ``SKS_KAFKA_HOME`` says otherwise; a missing tool is a :class:`ToolMissingError` whose message
says what to install.

Each Kafka version the suite runs (:data:`KAFKA_VERSIONS`) has its own folder, ``.kafka/kafka-<version>/lib``; the
version a test session runs is :func:`selected_kafka_version` (the ``KAFKA_VERSION`` environment variable, else
:data:`DEFAULT_KAFKA_VERSION`), and the transaction version its cluster is formatted with is
:func:`selected_transaction_version` (``KAFKA_TRANSACTION_VERSION``, else the release's default). Spark's connector
matches the installed pyspark (:func:`spark_connector_version`) and lives in ``.kafka/spark-jars-<version>``. The
test KDC's (Apache Kerby, for the Kerberos tests) live in ``.kafka/kdc``, the schema registry's (Apicurio Registry,
for the schema tests) in ``.kafka/apicurio-registry-<version>``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

__all__ = [
    "ToolMissingError",
    "REPO_ROOT",
    "CONF_DIR",
    "MIN_JAVA",
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSIONS",
    "SPARK_CONNECTOR_ARTIFACTS",
    "SPARK_CONNECTOR_VERSIONS",
    "spark_connector_version",
    "kafka_home",
    "broker_lib",
    "release",
    "tools_lib",
    "selected_kafka_version",
    "selected_transaction_version",
    "spark_connector_jars",
    "spark_avro_jars",
    "fetch_jars",
    "kdc_jars",
    "REGISTRY_VERSION",
    "registry_app",
    "require_java",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
MIN_JAVA = 17
# The newest patch release of each minor line the suite proves (on Maven Central): the default
# session runs the first, the newest release; `make test-versions` runs the others. 3.6.2 and 2.8.2 run in ZooKeeper
# mode (testing.broker).
DEFAULT_KAFKA_VERSION = "4.4.0"
KAFKA_VERSIONS = (DEFAULT_KAFKA_VERSION, "4.3.1", "3.9.2", "3.7.2", "3.6.2", "2.8.2")
_FIRST_WITH_KAFKA_TOOLS = (3, 5)  # the kafka-tools artifact (conf/kafka/pom.xml's "tools" profile)
# The artifacts of Spark's Kafka connector that pyspark does not already ship.
SPARK_CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)
# Spark's Kafka connector release for each pyspark minor line the project supports: the newest whose dependencies
# (spark-token-provider-kafka) the Maven mirror CI uses fully has (4.3 has none there, and 4.2's works under
# pyspark 4.3). A patch release apart from pyspark's is fine for reading back.
SPARK_CONNECTOR_VERSIONS = {"4.0": "4.0.0", "4.1": "4.1.1", "4.2": "4.2.0", "4.3": "4.2.0"}


class ToolMissingError(RuntimeError):
    """Java or Maven is missing or too old; the message says what to install."""


def kafka_home() -> Path:
    """Where the fetched jars live (``.kafka`` in the repo unless ``SKS_KAFKA_HOME`` says otherwise)."""
    return Path(os.environ.get("SKS_KAFKA_HOME", REPO_ROOT / ".kafka"))


def selected_kafka_version() -> str:
    """The Kafka version this process's brokers run: ``KAFKA_VERSION`` if set, else :data:`DEFAULT_KAFKA_VERSION`."""
    version = os.environ.get("KAFKA_VERSION", "").strip() or DEFAULT_KAFKA_VERSION
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ToolMissingError(f"KAFKA_VERSION={version!r} is not a Kafka release number such as 3.9.2")
    return version


def selected_transaction_version() -> int | None:
    """``KAFKA_TRANSACTION_VERSION`` (the ``transaction.version`` a 4.x cluster is formatted with), or None."""
    value = os.environ.get("KAFKA_TRANSACTION_VERSION", "").strip()
    if not value:
        return None
    if value not in ("0", "1", "2"):
        raise ToolMissingError(f"KAFKA_TRANSACTION_VERSION={value!r}: use 0, 1 or 2")
    return int(value)


def release(version: str) -> tuple[int, int]:
    """``"3.9.2"`` -> ``(3, 9)``: the minor line, what the launcher and the jar fetch decide by."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def tools_lib(version: str) -> Path:
    """The jars to run Kafka's command-line tools (kafka-tools: TransactionsCommand, DelegationTokenCommand ...)
    against a ``version`` broker: that release's own from 3.5 on, else the default release's, whose admin client
    speaks to older brokers."""
    return broker_lib(version if release(version) >= _FIRST_WITH_KAFKA_TOOLS else DEFAULT_KAFKA_VERSION)


def broker_lib(version: str | None = None) -> Path:
    """The folder of one Kafka release's jars (default: :func:`selected_kafka_version`)."""
    return kafka_home() / f"kafka-{version or selected_kafka_version()}" / "lib"


def spark_connector_version() -> str:
    """The release of Spark's Kafka connector that matches the installed pyspark (:data:`SPARK_CONNECTOR_VERSIONS`)."""
    from importlib.metadata import version

    pyspark = version("pyspark")
    connector = SPARK_CONNECTOR_VERSIONS.get(".".join(pyspark.split(".")[:2]))
    if connector is None:
        raise ToolMissingError(f"pyspark {pyspark} is not a version this project supports "
                               f"({', '.join(SPARK_CONNECTOR_VERSIONS)}): no Kafka connector is known for it")
    return connector


def _spark_connector_dir() -> Path:
    return kafka_home() / f"spark-jars-{spark_connector_version()}"


def spark_connector_jars() -> list[Path]:
    """The jar files of Spark's own ``format("kafka")`` connector for the installed pyspark, for ``spark.jars``."""
    return sorted(_spark_connector_dir().glob("*.jar"))


def _spark_avro_dir() -> Path:
    return kafka_home() / f"spark-avro-{spark_connector_version()}"


def spark_avro_jars() -> list[Path]:
    """Spark's own Avro functions (``from_avro``), for ``spark.jars``: read back what the sink wrote as Avro."""
    return sorted(_spark_avro_dir().glob("*.jar"))


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


def _copy_dependencies(pom: Path, dest: Path, include: Sequence[str] = (), exclude: Sequence[str] = (),
                       properties: Mapping[str, str] | None = None) -> None:
    if dest.is_dir() and any(dest.glob("*.jar")):
        return
    mvn = _require_maven()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=dest.name + "-", dir=dest.parent))
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={staging}"]
    cmd += [f"-D{key}={value}" for key, value in (properties or {}).items()]
    if include:
        cmd.append("-DincludeArtifactIds=" + ",".join(include))
    if exclude:
        cmd.append("-DexcludeArtifactIds=" + ",".join(exclude))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ToolMissingError(f"Maven could not fetch the jars of {pom}:\n{tail}")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)  # atomic: a half-copied folder is never mistaken for a complete one


def fetch_jars(kafka_versions: Sequence[str] = ()) -> None:
    """Copy Spark's Kafka connector's and the brokers' jars (default: the selected version's) from Maven Central."""
    require_java()
    kafka_home().mkdir(parents=True, exist_ok=True)
    for version in kafka_versions or (selected_kafka_version(),):
        # 3.x brings its own slf4j binding (slf4j-reload4j); two bindings on one classpath pick one at random, and
        # the broker's log config (conf/kafka/log4j2.properties) is for the log4j 2 binding the pom adds.
        properties = {"kafka.version": version}
        if release(version) < _FIRST_WITH_KAFKA_TOOLS:
            properties["kafka.without.tools"] = "true"
        _copy_dependencies(CONF_DIR / "kafka" / "pom.xml", broker_lib(version), exclude=("slf4j-reload4j",),
                           properties=properties)
    _copy_dependencies(CONF_DIR / "spark" / "pom.xml", _spark_connector_dir(), SPARK_CONNECTOR_ARTIFACTS,
                       properties={"spark.version": spark_connector_version()})
    _copy_dependencies(CONF_DIR / "spark" / "avro-pom.xml", _spark_avro_dir(), ("spark-avro_2.13",),
                       properties={"spark.version": spark_connector_version()})


def kdc_jars() -> list[Path]:
    """The test KDC's jar files (Apache Kerby's SimpleKdcServer, ``conf/kerberos/pom.xml``), fetched on first use."""
    require_java()
    dest = kafka_home() / "kdc"
    _copy_dependencies(CONF_DIR / "kerberos" / "pom.xml", dest)
    return sorted(dest.glob("*.jar"))


# Apicurio Registry: a Confluent-compatible schema registry published on Maven Central as a ready-built application
# (Confluent's own is not there). The 2.6 line runs on Java 17, the suite's minimum; 3.x needs Java 21.
REGISTRY_VERSION = "2.6.13.Final"
_REGISTRY_ARTIFACT = f"io.apicurio:apicurio-registry-app:{REGISTRY_VERSION}:tar.gz:all"


def registry_app() -> Path:
    """The schema registry's runnable jar (its ``lib/`` beside it), unpacked from Maven Central on first use."""
    require_java()
    dest = kafka_home() / f"apicurio-registry-{REGISTRY_VERSION}"
    jar = dest / f"apicurio-registry-app-{REGISTRY_VERSION}-runner.jar"
    if jar.is_file():
        return jar
    mvn = _require_maven()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=dest.name + "-", dir=dest.parent))
    # The plugin's "already unpacked" markers go in the staging folder too (by default it leaves them under the
    # working directory, and a marker left there would make a later unpack skip its work).
    markers = staging / ".markers"
    proc = subprocess.run([mvn, "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:unpack",
                           f"-Dartifact={_REGISTRY_ARTIFACT}", f"-DoutputDirectory={staging}",
                           f"-DmarkersDirectory={markers}"],
                          capture_output=True, text=True, cwd=staging)
    shutil.rmtree(markers, ignore_errors=True)
    if proc.returncode != 0 or not (staging / jar.name).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ToolMissingError(f"Maven could not fetch the schema registry {_REGISTRY_ARTIFACT}:\n{tail}")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)  # atomic: a half-unpacked folder is never mistaken for a complete one
    return jar
