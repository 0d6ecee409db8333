"""Test and tooling support: a real Kafka broker started from Maven Central jars, and what goes with it.

``broker`` starts and stops the broker (:class:`~spark_kafka_sink.testing.broker.KafkaCluster`), ``broker_jars``
finds Java and Maven and fetches the jars, ``broker_probe`` is the Metadata request that tells when it is ready,
``certs`` makes throw-away TLS material, ``demo`` is ``make run``; ``python -m spark_kafka_sink.testing`` runs the
Makefile's broker and demo commands. Import each name from the module that defines it.
"""
