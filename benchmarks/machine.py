"""What the numbers were measured on: CPU, cores, memory, versions, git commit, and how busy the machine was."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["machine_info", "cpu_model", "java_version"]

_PACKAGES = ("spark-kafka-sink", "pyspark", "pyarrow", "numpy", "lz4", "confluent-kafka", "kafka-python",
             "matplotlib")


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or "unknown")


def _mem_total_gb() -> float:
    try:
        text = Path("/proc/meminfo").read_text()
        kb = int(re.search(r"^MemTotal:\s+(\d+)", text, re.MULTILINE).group(1))  # type: ignore[union-attr]
        return round(kb / 1024 / 1024, 1)
    except (OSError, AttributeError):
        return 0.0


def java_version() -> str:
    java = shutil.which("java")
    if java is None:
        return "missing"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = (out.stderr or out.stdout).strip().splitlines()
    return first[0] if first else "unknown"


def _git_commit(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _versions() -> dict[str, str]:
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def _uptime_line() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info(repo: Path) -> dict[str, Any]:
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _mem_total_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "java": java_version(),
        "packages": _versions(),
        "git_commit": _git_commit(repo),
        "uptime_at_start": _uptime_line(),
    }


def uptime_line() -> str:
    return _uptime_line()
