# spark-kafka-sink: every target installs what it needs on a fresh machine (Python venv, Maven jars).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: venv jars deps test test-cluster test-network test-kerberos test-versions test-pyspark test-bench run run-avro bench kafka-up kafka-down clean

venv: $(STAMP)
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found: install Python 3.10+"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# compat mode: a plain path entry, so Spark's scan for pyspark_* modules (pkgutil) finds pyspark_kafka_sink
	$(PY) -m pip install -q -e '.[test,zstd,snappy,pkcs12]' --config-settings editable_mode=compat
	@touch $(STAMP)

jars: venv
	@$(PY) -m spark_kafka_sink.testing jars

# The suite runs in TEST_WORKERS processes (pytest-xdist): much of its time is spent waiting on brokers and Spark,
# so more processes than cores still gain. tests/conftest.py groups the tests so that a module stays in one process
# and the Spark and secure-broker tests in few. TEST_WORKERS=0 runs it all in one process.
TEST_WORKERS ?= 4
test: venv jars
	$(PY) -m ruff check .
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The slow tests of whole processes (tests/cluster): a 3-node Kafka cluster with nodes killed, a Spark standalone
# cluster (master + 2 workers) running the bundled job with executors and Python workers killed, the driver of
# exactly_once jobs killed at each point of the commit, writes through a Spark Connect server, a broker moved to
# another port (rebootstrap), the bundled job through spark-submit as installed, a Python worker's heap in a Spark
# of its own, and test sessions interrupted or SIGKILLed with their broker running.
# CLUSTER_WORKERS processes (tests/conftest.py groups them): the 3-node cluster's tests in one, the Spark clusters'
# in another, the rest where there is room.
CLUSTER_WORKERS ?= 3
test-cluster: venv jars
	$(PY) -m pytest -n $(CLUSTER_WORKERS) --dist loadgroup -m cluster tests/cluster $(PYTEST_ARGS)

# Network faults (tests/network): the 3-node cluster with each node's JVM in a network namespace of its own, one
# veth link to clients and another to the controller quorum and replication, so a test can cut either for real (a
# link set down drops packets: no FIN, no RST) -- a node blackholed, a leader isolated from its peers, a flapping
# client link, the driver cut from its transaction coordinator -- and toxiproxy in front of each node for a slow
# link (this kernel has no netem). Needs root (namespaces; CI runs as root) and Go, which builds toxiproxy into
# .tools/bin from the Go module proxy. One process: one cluster for every test. About 5 minutes.
TOXIPROXY_VERSION := v2.12.0
TOXIPROXY := .tools/bin/toxiproxy-server
$(TOXIPROXY):
	@command -v go >/dev/null || { echo "error: make test-network builds toxiproxy with Go: install Go (go.dev/dl, \
	or Debian's golang package) and run make test-network again"; exit 2; }
	@mkdir -p .tools/bin .tools/go-build
	GOBIN=$(abspath .tools/go-build) go install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	mv .tools/go-build/server $(TOXIPROXY)

test-network: venv jars $(TOXIPROXY)
	$(PY) -m pytest -p no:cacheprovider -n 0 -m network tests/network $(PYTEST_ARGS)

# SASL/GSSAPI (tests/kerberos): a KDC (Apache Kerby, from Maven Central), a broker with a Kerberos listener, and
# the optional gssapi package, which builds against MIT Kerberos's headers: installed here from Debian's
# libkrb5-dev when krb5-config is missing (as root; otherwise the message says what to install). About 3 minutes.
KRB_STAMP := $(VENV)/.gssapi-installed
APT_KRB5 := DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libkrb5-dev >/dev/null
$(KRB_STAMP): $(STAMP)
	@command -v krb5-config >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && { $(APT_KRB5) || { apt-get update -q >/dev/null && $(APT_KRB5); }; }; } \
	  || { echo "error: the gssapi package builds against MIT Kerberos: install its headers (Debian/Ubuntu: \
	  apt-get install libkrb5-dev; Fedora: dnf install krb5-devel) and run make test-kerberos again"; exit 2; }
	$(PY) -m pip install -q -e '.[test,zstd,snappy,pkcs12,gssapi]' --config-settings editable_mode=compat
	@touch $(KRB_STAMP)

test-kerberos: venv jars $(KRB_STAMP)
	$(PY) -m pytest -m kerberos tests/kerberos $(PYTEST_ARGS)

# The core set against every other Kafka release the project claims (README "Kafka versions"); `make test` runs
# everything on 4.4.0 with its default transaction.version 2. Each run starts its own broker of that release (3.6.2
# and 2.8.2 in ZooKeeper mode, with a ZooKeeper server of their own), so the runs are independent: VERSION_JOBS of
# them run at once (they mostly wait on brokers). The Spark sink's tests run on 3.9.2, 3.7.2 and 3.6.2 in make
# test-pyspark (with pyspark 4.2, 4.1 and 4.0), on the others here.
SINK_VERSION_TESTS := tests/spark/test_sink_guarantees.py
TRANSACTION_TESTS := tests/producer/test_epoch_bump_broker.py tests/producer/transactions/test_transactions_broker.py \
	tests/producer/transactions/test_flow_broker.py tests/producer/transactions/test_offsets_broker.py
PRODUCER_VERSION_TESTS := tests/protocol/test_against_broker.py tests/producer/test_codecs_broker.py \
	tests/producer/test_failover_broker.py $(TRANSACTION_TESTS)
VERSION_JOBS ?= 3
# Longest first, so the last to start is not the longest to finish.
VERSION_RUNS := 2.8.2 3.6.2 4.3.1 3.9.2 3.7.2 4.4.0-tv1
test-versions: venv
	@$(PY) -m spark_kafka_sink.testing jars --all-kafka-versions
	@$(MAKE) --no-print-directory -j$(VERSION_JOBS) --output-sync=target $(addprefix kafka-version-,$(VERSION_RUNS))

.PHONY: $(addprefix kafka-version-,$(VERSION_RUNS))
kafka-version-4.3.1:
	KAFKA_VERSION=4.3.1 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PRODUCER_VERSION_TESTS) $(SINK_VERSION_TESTS)
kafka-version-3.9.2:
	KAFKA_VERSION=3.9.2 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PRODUCER_VERSION_TESTS)
kafka-version-3.7.2:
	KAFKA_VERSION=3.7.2 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PRODUCER_VERSION_TESTS)
# 4.4.0 again, formatted with classic transactions (checked by the versions test): what transaction.version changes.
# Its codecs and failover are 4.4.0's, which make test runs.
kafka-version-4.4.0-tv1:
	KAFKA_VERSION=4.4.0 KAFKA_TRANSACTION_VERSION=1 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(TRANSACTION_TESTS) \
	  $(SINK_VERSION_TESTS) tests/protocol/test_against_broker.py::test_api_versions_negotiates_the_highest_common_versions
kafka-version-3.6.2:
	KAFKA_VERSION=3.6.2 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PRODUCER_VERSION_TESTS)
# 2.8 looks for idle producer ids every 10 minutes, a constant: the test of a forgotten producer cannot run there.
kafka-version-2.8.2:
	KAFKA_VERSION=2.8.2 $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PRODUCER_VERSION_TESTS) $(SINK_VERSION_TESTS) --deselect \
	  tests/producer/test_epoch_bump_broker.py::test_a_broker_that_forgot_an_idle_producer_accepts_its_next_sequence

# The core Spark tests on every older pyspark the project claims (README "Versions"), each in its own venv
# (.venv-pyspark-<minor>) with that pyspark pinned, on Python 3.10, the oldest claimed for them; `make test` runs
# everything on pyspark 4.3 (Python 3.11+). Each runs against an older Kafka release (pyspark@Kafka below), which
# make test-versions then leaves to the producer's tests. Read back with confluent-kafka: pyspark < 4.3's collect()
# leaves its socket to the garbage collector, a ResourceWarning the suite treats as an error. The three runs are
# independent (a venv, a broker and a Spark session each): PYSPARK_JOBS of them run at once.
PYSPARK_OLDER := 4.0.5@3.6.2 4.1.4@3.7.2 4.2.1@3.9.2
PYSPARK_TESTS := tests/spark/test_registration.py tests/spark/test_row_batches.py \
	tests/spark/test_stream_columns.py tests/spark/test_sink_guarantees.py tests/spark/test_sink_streaming.py \
	tests/spark/test_sink_errors.py
PYSPARK_JOBS ?= 3
# The runs' local time zone, not UTC: pyspark 4.0's stream writer gets timestamps as naive datetimes in the Python
# worker's zone, which the sink must turn back into instants; on a UTC host a missed conversion would not show.
PYSPARK_TZ ?= America/New_York
# Python 3.10 from a pyenv install (its shim on PATH only runs it when selected), else python3.10 on PATH.
PYTHON_3_10 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) python3.10)
test-pyspark: venv
	@$(PY) -m spark_kafka_sink.testing jars --all-kafka-versions
	@$(PYTHON_3_10) -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null || { echo "error: \
	make test-pyspark needs Python 3.10 (README \"Versions\" claims it for pyspark 4.0-4.2) and $(PYTHON_3_10) \
	is not it: install it (pyenv install 3.10) or set PYTHON_3_10=/path/to/python3.10"; exit 2; }
	@$(MAKE) --no-print-directory -k -j$(PYSPARK_JOBS) --output-sync=target $(addprefix pyspark-version-,$(PYSPARK_OLDER))

# A static pattern rule: make skips implicit-rule search for .PHONY targets, so a plain pattern rule would do nothing.
.PHONY: $(addprefix pyspark-version-,$(PYSPARK_OLDER))
$(addprefix pyspark-version-,$(PYSPARK_OLDER)): pyspark-version-%:
	@pair=$*; version=$${pair%%@*}; kafka=$${pair##*@}; \
	venv=.venv-pyspark-$${version%.*}; stamp=$$venv/.installed-$$version; \
	if [ ! -f $$stamp ] || [ pyproject.toml -nt $$stamp ]; then \
	  echo "== creating $$venv (pyspark $$version)"; rm -rf $$venv; \
	  $(PYTHON_3_10) -m venv $$venv && $$venv/bin/python -m pip install -q --upgrade pip \
	  && $$venv/bin/python -m pip install -q -e '.[test,zstd,snappy,pkcs12]' --config-settings editable_mode=compat \
	    "pyspark==$$version" && touch $$stamp || exit 2; \
	fi; \
	echo "== pyspark $$version, $$($$venv/bin/python -V), Kafka $$kafka"; \
	KAFKA_VERSION=$$kafka TZ=$(PYSPARK_TZ) PYSPARK_PYTHON=$(CURDIR)/$$venv/bin/python PYSPARK_DRIVER_PYTHON=$(CURDIR)/$$venv/bin/python \
	  $$venv/bin/python -m pytest -p no:cacheprovider $(PYTEST_ARGS) $(PYSPARK_TESTS) \
	  || { echo "error: the pyspark matrix failed on pyspark $$version"; exit 1; }

run: venv jars
	@$(PY) -m spark_kafka_sink.testing run-demo $(if $(ROWS),--rows $(ROWS))

# The same with Avro values through a schema registry (Apicurio Registry from Maven Central, started and stopped
# here): jobs/avro_to_kafka.py, read back with confluent-kafka's AvroDeserializer.
run-avro: venv jars
	@$(PY) -m spark_kafka_sink.testing run-avro-demo

# Peer libraries (kafka-python, matplotlib, ...) for the benchmarks only: not runtime dependencies.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) benchmarks/requirements.txt
	$(PY) -m pip install -q -r benchmarks/requirements.txt
	@touch $(BENCH_STAMP)

bench: venv jars $(BENCH_STAMP)
	$(PY) -m benchmarks $(BENCH_ARGS)

# The benchmarks' smoke test (tests/test_bench_smoke.py): every `make bench` group runs end to end at a tiny scale
# (`--quick`) and writes its results; nothing is timed. Its own target: it takes ~2.5 minutes.
test-bench: venv jars
	$(PY) -m pytest tests/test_bench_smoke.py $(PYTEST_ARGS)

kafka-up: venv jars
	@$(PY) -m spark_kafka_sink.testing up --port $(or $(PORT),9092)

kafka-down: venv
	@$(PY) -m spark_kafka_sink.testing down

clean:
	rm -rf $(VENV) .venv-pyspark-* .kafka .tools build *.egg-info .pytest_cache

# The documentation site (mkdocs.yml, docs/): `make docs` builds it into site/ with --strict, so a broken link or
# anchor, a page missing from the nav or a docstring mkdocstrings cannot render fails the build; `make docs-serve`
# serves it on http://127.0.0.1:8000 with live reload. Both work offline: no fonts or scripts from CDNs, and the
# diagrams are SVG files rendered from their sources in docs/diagrams/ by `make docs-diagrams` (maintainers only:
# it needs Node's npx and a Chromium, neither of which the build needs).
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[docs]' --config-settings editable_mode=compat
	@touch $(DOCS_STAMP)

.PHONY: docs docs-serve docs-diagrams
docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	$(PY) -m mkdocs serve --strict

docs-diagrams:
	$(PY) docs/diagrams/render.py

# What the targets beyond `make test` install into the venv and the jar cache, all at once: .ci/run installs it
# before running those targets side by side, so that none of them reinstalls the package into the venv while
# another runs from it. (The older pyspark lines have venvs of their own, made by make test-pyspark.)
deps: venv jars $(KRB_STAMP) $(DOCS_STAMP)
	@$(PY) -m spark_kafka_sink.testing jars --all-kafka-versions
