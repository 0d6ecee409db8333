"""mkdocs hook: publish the benchmark results that live outside docs/ under the same paths as in the repository.

The docs' Benchmarks page shows the latest run's plot and links the history in benchmarks/results/; those files
stay where `make bench` writes them (one copy in git), and this hook adds their .md and .png files to the site at
benchmarks/results/... (the .json samples stay out: they are large and only tools read them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = "benchmarks/results"


def on_files(files: Files, config: Any) -> Files:
    for path in sorted((REPO_ROOT / RESULTS).iterdir()):
        if path.suffix in (".md", ".png"):
            files.append(File(f"{RESULTS}/{path.name}", str(REPO_ROOT), config["site_dir"],
                              config["use_directory_urls"]))
    return files
