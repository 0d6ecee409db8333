"""No JVM and no broker data survive an interrupted test session (each case starts a real broker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from spark_kafka_sink.testing.broker import sweep_stale_dirs
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from tests.conftest import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.broker]

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


def _start_inner_session(tmp_path: Path) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
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
    def started() -> bool:
        if proc.poll() is not None:
            raise AssertionError("the inner session exited")
        return info_file.exists() and bool(info_file.read_text())

    try:
        wait_for("the inner session's broker", started, timeout=120)
    except AssertionError:
        proc.kill()
        proc.wait()
        raise AssertionError(f"inner session never started its broker:\n{log.read_text()}") from None
    return proc, json.loads(info_file.read_text())


def _wait_gone(pids: list[int], timeout: float = 30.0) -> None:
    wait_for(f"processes {pids} to exit", lambda: not any(psutil.pid_exists(p) for p in pids), timeout=timeout)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_session_leaves_no_jvm_and_no_data(tmp_path: Path, sig: signal.Signals) -> None:
    proc, info = _start_inner_session(tmp_path)
    pids: list[int] = info["pids"]
    data_dir = Path(str(info["dir"]))
    assert pids and all(psutil.pid_exists(p) for p in pids) and data_dir.is_dir()

    proc.send_signal(sig)  # what Ctrl-C (SIGINT) or a CI cancel (SIGTERM) does
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # leave nothing running for the tests after this one
        proc.wait()
        raise AssertionError(f"the session did not end within 60 s of {sig.name}") from None
    _wait_gone(pids)
    assert not data_dir.exists()


def test_killed_session_leaves_no_jvm_and_its_data_is_swept(tmp_path: Path) -> None:
    proc, info = _start_inner_session(tmp_path)
    pids: list[int] = info["pids"]
    data_dir = Path(str(info["dir"]))

    proc.kill()  # SIGKILL: no teardown runs at all
    proc.wait(timeout=30)
    _wait_gone(pids)  # the kernel killed the JVM (parent-death signal)
    assert data_dir in sweep_stale_dirs()
    assert not data_dir.exists()
