"""No JVM and no broker data survive an interrupted test session; missing tools give one clear line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spark_kafka_sink.testing.broker import _pid_alive, sweep_stale_dirs
from spark_kafka_sink.testing.broker_jars import REPO_ROOT

# A pytest session of its own that takes the session broker fixture, records where it lives, then blocks.
INNER_TEST = textwrap.dedent("""
    import json, os, threading
    from tests.conftest import kafka, bootstrap  # noqa: F401  (the real session fixtures)

    def test_block(kafka):
        info = {"pids": kafka.pids(), "dir": str(kafka.base_dir)}
        with open(os.environ["SKS_INFO_FILE"], "w") as f:
            json.dump(info, f)
        threading.Event().wait()  # until the parent interrupts this session
""")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_inner_session(tmp_path: Path) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    test_file = tmp_path / "test_inner_block.py"
    test_file.write_text(INNER_TEST)
    info_file = tmp_path / "info.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), SKS_INFO_FILE=str(info_file))
    log = tmp_path / "inner.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            # A job started in the background (`make test &`, some CI runners) inherits SIGINT ignored, and Python
            # keeps an ignored SIGINT ignored: give the session the terminal's default, as a real Ctrl-C meets.
            preexec_fn=_default_sigint,
        )
    deadline = time.monotonic() + 120
    while not info_file.exists() or not info_file.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"inner session never started its broker:\n{log.read_text()}")
        time.sleep(0.1)  # poll interval of a condition wait
    return proc, json.loads(info_file.read_text())


def _wait_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)  # poll interval of a condition wait
    return [p for p in pids if _pid_alive(p)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_session_leaves_no_jvm_and_no_data(tmp_path: Path, sig: signal.Signals) -> None:
    proc, info = _start_inner_session(tmp_path)
    pids = list(info["pids"])  # type: ignore[call-overload]
    data_dir = Path(str(info["dir"]))
    assert pids and all(_pid_alive(p) for p in pids) and data_dir.is_dir()

    proc.send_signal(sig)  # what Ctrl-C (SIGINT) or a CI cancel (SIGTERM) does
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # leave nothing running for the tests after this one
        proc.wait()
        raise AssertionError(f"the session did not end within 60 s of {sig.name}") from None
    assert _wait_gone(pids) == []
    assert not data_dir.exists()


def test_killed_session_leaves_no_jvm_and_its_data_is_swept(tmp_path: Path) -> None:
    proc, info = _start_inner_session(tmp_path)
    pids = list(info["pids"])  # type: ignore[call-overload]
    data_dir = Path(str(info["dir"]))

    proc.kill()  # SIGKILL: no teardown runs at all
    proc.wait(timeout=30)
    assert _wait_gone(pids) == []  # the kernel killed the JVM (parent-death signal)
    assert data_dir in sweep_stale_dirs()
    assert not data_dir.exists()


def _run_cli(args: list[str], path: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=path, SKS_KAFKA_HOME=str(tmp_path / "kafka-home"))
    return subprocess.run([sys.executable, "-m", "spark_kafka_sink.testing", *args],
                          env=env, capture_output=True, text=True, timeout=60)


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = _run_cli(["up", "--port", "1"], str(empty), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java 17+ is needed" in lines[0] and "install" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_maven_is_one_clear_line(tmp_path: Path) -> None:
    java_only = tmp_path / "java-bin"
    java_only.mkdir()
    java = subprocess.run(["bash", "-c", "readlink -f $(command -v java)"], capture_output=True, text=True).stdout
    (java_only / "java").symlink_to(java.strip())
    result = _run_cli(["jars"], str(java_only), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Maven is needed" in lines[0] and "apt-get install maven" in lines[0]
