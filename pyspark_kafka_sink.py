"""Spark imports every top-level ``pyspark_*`` module and registers its ``DefaultSource``.

Installing the package therefore makes ``format("pykafka-sink")`` available with no explicit registration.
"""
