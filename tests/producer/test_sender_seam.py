"""The scripted network client the sender's tests use satisfies the sender's seam, ``SenderClient``: mypy --strict
checks ``FakeClient`` against the Protocol (fake_client.py ends with that check), so the fake cannot drift from
what ``Sender`` really calls while the tests keep passing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_fake_client_satisfies_sender_client() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "tests/producer/fake_client.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
