"""The README and the docs pages: the producer options table and the list of Java keys taken and ignored are the
ones generated from the code; the README's code is the examples' code; relative links resolve to tracked files;
the diagrams are rendered from their current sources; and the pages speak to users, with no commit hashes, run
dates or work-session talk (those belong in commit messages and benchmarks/results/)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from spark_kafka_sink.producer.config_options import ignored_options_markdown, options_markdown
from spark_kafka_sink.testing.broker_jars import REPO_ROOT

DOCS = REPO_ROOT / "docs"
USER_PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md", REPO_ROOT / "CHANGELOG.md",
              *sorted(DOCS.rglob("*.md"))]


def tracked_files() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_options_page_matches_the_code() -> None:
    page = (DOCS / "producer" / "options.md").read_text()
    assert options_markdown().strip() in page, "regenerate the options table from options_markdown()"
    assert ignored_options_markdown() in page, "regenerate the ignored keys from ignored_options_markdown()"


def test_readme_and_contributing_name_the_commands() -> None:
    text = (REPO_ROOT / "README.md").read_text() + (REPO_ROOT / "CONTRIBUTING.md").read_text()
    for command in ("make test", "make run", "make bench", "make kafka-up", "make kafka-down", "make docs"):
        assert command in text


def snippet_section(path: Path, name: str) -> str:
    match = re.search(rf"^[ \t]*# --8<-- \[start:{name}\]\n(.*?)^[ \t]*# --8<-- \[end:{name}\]", path.read_text(),
                      re.S | re.M)
    assert match, f"{path.name} has no section {name!r}"
    return textwrap.dedent(match.group(1))


def test_pages_include_only_existing_example_sections() -> None:
    """Every `--8<-- "file:section"` names a file and a section that exist (mkdocs would show an empty block)."""
    for page in DOCS.rglob("*.md"):
        for path, name in re.findall(r'--8<-- "([^":]+):([^"]+)"', page.read_text()):
            snippet_section(REPO_ROOT / path, name)


def test_readme_code_is_the_examples_code() -> None:
    """GitHub cannot include files: the README's Python blocks are copies of example sections, kept equal here."""
    readme = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    sections = [snippet_section(REPO_ROOT / "examples" / "spark_quickstart.py", "write"),
                snippet_section(REPO_ROOT / "examples" / "producer_quickstart.py", "produce")]
    assert blocks == sections, "copy the example sections into the README again"


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve_to_tracked_files(page: Path) -> None:
    """A link from the README or a page to a file must reach a committed file (a benchmark result left out by
    .gitignore would be missing from a clone). mkdocs --strict checks links between pages and their anchors."""
    tracked = tracked_files()
    text = page.read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and t[0] != "#"}
    missing = []
    for target in targets:
        path = (page.parent / target).resolve()
        if page.parent == DOCS or DOCS in page.parents:
            if target.startswith("benchmarks/results/") or "/benchmarks/results/" in target:
                path = (REPO_ROOT / target[target.index("benchmarks/results/"):]).resolve()
        rel = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else target
        if rel not in tracked and not any(p.startswith(rel + "/") for p in tracked):
            missing.append(target)
    assert missing == [], f"{page.name} links to files git does not track: {sorted(missing)}"


def test_benchmark_history_links_tracked_results() -> None:
    history = REPO_ROOT / "benchmarks" / "results" / "README.md"
    tracked = tracked_files()
    links = set(re.findall(r"\]\(([^)\s#]+)\)", history.read_text()))
    missing = sorted(t for t in links if "://" not in t and f"benchmarks/results/{t}" not in tracked)
    assert missing == [], f"the history links results git does not track: {missing}"


# What ages: a commit hash, a date or a clock time of a run, a test run's timing, a work session, "the issue".
AGEING = [
    (re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])"), "a commit hash"),
    (re.compile(r"(?<![\w/.-])20\d\d-\d\d-\d\d(?![\w-]*\.(md|png|json))"), "a date"),
    (re.compile(r"\b\d+ ?m \d+ ?s\b"), "a test run's timing"),
    (re.compile(r"\bsession ?\d+", re.I), "a work session"),
    (re.compile(r"\bthe issue\b", re.I), "talk of the issue"),
    (re.compile(r"\b(at|on) \d\d:\d\d\b"), "a clock time"),
]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_pages_carry_no_hashes_dates_or_sessions(page: Path) -> None:
    text = re.sub(r"benchmarks/results/[\w.-]+", "", page.read_text())   # result files are named by date
    found = [f"{what}: {m.group(0)!r}" for pattern, what in AGEING for m in pattern.finditer(text)]
    assert found == [], f"{page.name} has what belongs in commit messages or benchmarks/results/: {found}"


def test_diagrams_are_rendered_from_their_sources() -> None:
    for source in sorted((DOCS / "diagrams").glob("*.mmd")):
        svg = source.with_suffix(".svg")
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        assert svg.is_file() and f"sha256 {digest}" in svg.read_text().split("\n", 1)[0], \
            f"{source.name} changed: run make docs-diagrams"
