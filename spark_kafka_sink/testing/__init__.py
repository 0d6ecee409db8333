"""Test and tooling support: a real Kafka broker started from Maven Central jars."""
