"""The bundled spark-submit jobs: ``--help`` lists their arguments; batch_to_kafka and avro_to_kafka write end to
end."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_kafka_sink.testing.avro_demo import run_avro_demo
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from spark_kafka_sink.testing.demo import summary_rate
from spark_kafka_sink.testing.spark_cluster import build_wheel
from tests.conftest import ConsumedRecord

JOBS = REPO_ROOT / "jobs"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
ENV = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("job", ["batch_to_kafka", "stream_to_kafka", "foreach_batch_to_kafka", "avro_to_kafka"])
def test_help_lists_arguments(job: str) -> None:
    """--help lists every argument the job's parser declares, each with its help text."""
    import re

    proc = subprocess.run([sys.executable, str(JOBS / f"{job}.py"), "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    source = (JOBS / f"{job}.py").read_text()
    declared = re.findall(r'add_argument\(\s*"(--[a-z-]+)"[^)]*?help="([^"]+)"', source, re.S)
    assert len(declared) == source.count("add_argument(")
    assert {"--bootstrap-servers", "--topic"} <= {flag for flag, _ in declared}
    shown = " ".join(proc.stdout.split())  # argparse wraps the help text
    for flag, text in declared:
        assert flag in shown and " ".join(text.split())[:30] in shown, (flag, proc.stdout)


@pytest.mark.spark
@pytest.mark.broker
def test_batch_job_through_spark_submit_as_installed(bootstrap: str, topic_factory: Callable[..., str],
                                                     readback: Callable[..., list[ConsumedRecord]],
                                                     tmp_path: Path) -> None:
    """spark-submit of the bundled job, started outside the repository, finds the format with no register call.

    ``pyspark_kafka_sink.py`` sits alone in a site-packages-like folder on PYTHONPATH, where ``pip install`` puts a
    top-level module; Spark's scan of its workers' sys.path must find it there. (From inside the repository the
    workers' current folder would supply it, hiding a packaging mistake.)
    """
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.copy(REPO_ROOT / "pyspark_kafka_sink.py", site)
    env = {**ENV, "PYTHONPATH": str(site)}
    topic = topic_factory(partitions=3)
    help_proc = subprocess.run([str(SPARK_SUBMIT), str(JOBS / "batch_to_kafka.py"), "--help"], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert help_proc.returncode == 0 and "--guarantee" in help_proc.stdout, help_proc.stderr[-2000:]
    proc = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false", str(JOBS / "batch_to_kafka.py"),
         "--bootstrap-servers", bootstrap, "--topic", topic, "--rows", "3000", "--guarantee", "exactly_once"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "batch_to_kafka: wrote 3000 rows" in proc.stdout
    assert "pykafka-sink committed 3000 rows" in proc.stderr  # the driver's summary line
    # `make run` reports the write's own rate from that line, not the job's wall time.
    rate = summary_rate(proc.stderr.splitlines())
    assert re.fullmatch(r"[\d,]+ rows/s \(3000 rows in [\d.]+ s, first task start to commit; the sink's summary\)",
                        rate), rate
    records = readback(topic)
    assert len(records) == 3000 and len({r.value for r in records}) == 3000
    assert all(r.headers == (("source", b"batch_to_kafka"),) for r in records)


def test_the_avro_job_reads_back_through_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    """``make run-avro``: a broker and a registry of its own, the bundled Avro job through spark-submit, and every
    order read back exactly once by confluent-kafka's AvroDeserializer."""
    assert run_avro_demo(rows=3000) == 0
    out = capsys.readouterr().out
    assert "read back          : 3000 records, missing / duplicate: 0 / 0" in out
    assert "'amount': Decimal(" in out and "'address': {'street': 'Main street 1'" in out


def _python_without_the_package(folder: Path) -> Path:
    """A venv that sees this venv's third-party packages (pyspark, pyarrow, numpy, crc32c, lz4) but not
    spark-kafka-sink: its .pth lists our site-packages, whose own .pth files (the editable install's) it skips."""
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "pyspark").is_dir())
    Path(site, "deps.pth").write_text(ours + "\n")
    return python


@pytest.mark.spark
@pytest.mark.broker
def test_batch_job_with_the_wheel_on_py_files(bootstrap: str, topic_factory: Callable[..., str],
                                              readback: Callable[..., list[ConsumedRecord]],
                                              tmp_path: Path) -> None:
    """The cluster guide's --py-files path: the package's wheel, under a .zip name, passed with ``--py-files`` to a
    driver and workers whose Python has the dependencies but not the package; the job registers the format itself.
    Read back with confluent-kafka at read_committed."""
    # A .whl name would not do: PySpark puts only .zip, .egg and .jar files of --py-files on its workers' path.
    shipped = build_wheel(tmp_path / "dist").rename(tmp_path / "spark_kafka_sink.zip")
    python = _python_without_the_package(tmp_path / "bare")
    work = tmp_path / "work"  # not the checkout: the workers' current folder would supply the package
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)})
    missing = subprocess.run([str(python), "-c", "import spark_kafka_sink"], cwd=work, env=env,
                             capture_output=True, text=True)
    assert missing.returncode != 0 and "No module named 'spark_kafka_sink'" in missing.stderr, missing
    topic = topic_factory(partitions=3)
    proc = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--py-files", str(shipped),
         str(JOBS / "batch_to_kafka.py"), "--register", "--bootstrap-servers", bootstrap, "--topic", topic,
         "--rows", "3000", "--partitions", "3", "--guarantee", "exactly_once"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "\n".join(line for line in proc.stderr.splitlines() if " INFO " not in line)[-4000:]
    assert "pykafka-sink committed 3000 rows" in proc.stderr  # the driver's summary line: the sink did the write
    orders = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic))
    assert orders == Counter(range(3000))
