"""The README's producer options table, and its list of the Java keys taken and ignored, are the ones generated
from the options declared in the code."""

from __future__ import annotations

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
