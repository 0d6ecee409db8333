"""The README's producer options table is the one generated from the options declared in the code."""

from __future__ import annotations

from spark_kafka_sink.producer.config_options import options_markdown
from spark_kafka_sink.testing.broker_jars import REPO_ROOT


def test_readme_options_table_matches_the_code() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert options_markdown().strip() in readme, "regenerate the README table from options_markdown()"


def test_readme_names_the_commands() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    for command in ("make test", "make run", "make bench", "make kafka-up", "make kafka-down"):
        assert command in readme
