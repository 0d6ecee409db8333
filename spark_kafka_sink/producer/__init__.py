"""The producer engine, shaped like the Java KafkaProducer."""
