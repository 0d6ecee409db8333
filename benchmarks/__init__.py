"""Benchmarks of spark-kafka-sink against its peers (``make bench``; see README "Benchmarks").

Modules: ``harness`` (alternating rounds, median and spread, ratios), ``workload`` (the records), ``context``
(broker, topics, Spark session), ``report`` (table, JSON, PNG), ``machine`` (what it ran on), ``targets`` (the
issue's goals), and one ``bench_*`` module per comparison group: encoder, producer, spark, memory.
"""
