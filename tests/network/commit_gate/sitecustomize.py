"""The coordinator-cut tests' gate, loaded by every Python process of the network tests' Spark session (their
fixture puts this folder on PYTHONPATH, which Spark passes on to its Python workers, where the data source's
commit runs).

With ``SKS_NET_COMMIT_GATE=<folder>`` in the environment it registers a commit hook
(``spark_kafka_sink.spark.commit.add_commit_hook``): when ``<folder>/armed`` exists at the commit's ``after-plan``
step, it consumes it, writes ``<folder>/paused`` and waits for ``<folder>/release`` (the test cuts the link in
between), so the cut falls inside the commit. The package has no switch of its own: without this module nothing is
registered.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

GATE_ENV = "SKS_NET_COMMIT_GATE"
WAIT_LIMIT_S = 300.0


def _install() -> None:
    folder = os.environ.get(GATE_ENV)
    if not folder:
        return
    from spark_kafka_sink.spark.commit import add_commit_hook

    gate = Path(folder)

    def hook(step: str, write_id: int) -> None:
        if step != "after-plan":
            return
        try:
            (gate / "armed").rename(gate / "taken")  # once per arming, whichever process commits
        except FileNotFoundError:
            return
        (gate / "paused").write_text(f"{os.getpid()} {write_id}")
        deadline = time.monotonic() + WAIT_LIMIT_S
        while not (gate / "release").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{GATE_ENV}: the test did not release the commit within {WAIT_LIMIT_S:g} s")
            time.sleep(0.05)  # polling the test's release file

    add_commit_hook(hook)


_install()
