"""The README's producer options table, and its list of the Java keys taken and ignored, are the ones generated
from the options declared in the code; its commands and links are there."""

from __future__ import annotations

import re
import subprocess

from spark_kafka_sink.producer.config_options import ignored_options_markdown, options_markdown
from spark_kafka_sink.testing.broker_jars import REPO_ROOT


def test_readme_options_table_matches_the_code() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert options_markdown().strip() in readme, "regenerate the README table from options_markdown()"
    assert ignored_options_markdown() in readme, "regenerate the README's ignored keys from ignored_options_markdown()"


def test_readme_names_the_commands() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    for command in ("make test", "make run", "make bench", "make kafka-up", "make kafka-down"):
        assert command in readme


def test_readme_links_to_files_of_the_repository() -> None:
    """Every relative link resolves in a checkout: a results file the README cites must be committed, not left out
    by .gitignore (the benchmark runs are ignored unless listed there)."""
    readme = (REPO_ROOT / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme) if "://" not in t and t[0] != "#"}
    assert targets, "no relative links found: the pattern is out of date"
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True,
                                 check=True).stdout.split())
    missing = sorted(t for t in targets if t not in tracked and not any(p.startswith(t + "/") for p in tracked))
    assert missing == [], f"README links to files git does not track: {missing}"
