from __future__ import annotations

import pickle
import sys
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.config_options import MAX_INT32, OPTIONS, options_markdown
from spark_kafka_sink.secret import Secret

BASE = {"bootstrap.servers": "127.0.0.1:9092"}


def cfg(extra: dict[str, Any]) -> ProducerConfig:
    return ProducerConfig.from_dict({**BASE, **extra})


def test_java_defaults() -> None:
    c = cfg({})
    assert c.bootstrap_servers == ("127.0.0.1:9092",)
    assert (c.acks, c.enable_idempotence, c.linger_ms, c.batch_size) == (-1, True, 5, 16384)
    assert (c.buffer_memory, c.max_block_ms, c.delivery_timeout_ms, c.request_timeout_ms) == (
        33554432, 60000, 120000, 30000)
    assert (c.max_in_flight_requests_per_connection, c.retries, c.retry_backoff_ms) == (5, MAX_INT32, 100)
    assert (c.compression_type, c.max_request_size, c.transactional_id) == ("none", 1048576, None)
    assert c.explicitly_set == frozenset({"bootstrap.servers"})
    assert not c.is_transactional and not c.uses_ssl and not c.uses_sasl


def test_string_values_are_parsed_like_spark_options() -> None:
    c = cfg({"linger.ms": "10", "enable.idempotence": "TRUE", "acks": "all", "batch.size": " 1000 ",
             "compression.type": "LZ4", "partitioner.ignore.keys": "true", "security.protocol": "ssl"})
    assert (c.linger_ms, c.enable_idempotence, c.acks, c.batch_size) == (10, True, -1, 1000)
    assert (c.compression_type, c.partitioner_ignore_keys, c.security_protocol) == ("lz4", True, "SSL")


@pytest.mark.parametrize("raw,expected", [("all", -1), ("-1", -1), ("0", 0), ("1", 1), (-1, -1), (1, 1)])
def test_acks_values(raw: object, expected: int) -> None:
    c = cfg({"acks": raw, "enable.idempotence": "false"})
    assert c.acks == expected


def test_bootstrap_servers_forms() -> None:
    assert cfg({"bootstrap.servers": "a:1, b:2,[::1]:9093"}).bootstrap_servers == ("a:1", "b:2", "[::1]:9093")
    assert cfg({"bootstrap.servers": ["a:1", "b:2"]}).bootstrap_servers == ("a:1", "b:2")
    for bad in ("a", "a:0", "a:99999", ""):
        with pytest.raises(ConfigError, match="bootstrap.servers"):
            cfg({"bootstrap.servers": bad})
    with pytest.raises(ConfigError, match="required"):
        ProducerConfig.from_dict({})


def test_unknown_key_suggests_nearest_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'") as info:
        cfg({"linger.msec": 5})
    assert info.value.key == "linger.msec"
    with pytest.raises(ConfigError, match="'max.in.flight.requests.per.connection'"):
        cfg({"max.inflight.requests.per.connection": 5})


def test_java_keys_that_are_no_producer_setting_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """A consumer's keys (one configuration shared by a consumer and a producer) and the JVM's metric reporters:
    the Java producer takes them and ignores them, and so does this one, logging each key but not its value."""
    c = cfg({"group.id": "readers-7f3a", "session.timeout.ms": "45000", "metric.reporters": "com.example.Reporter",
             "enable.metrics.push": "true"})
    assert c.ignored == {"group.id", "session.timeout.ms", "metric.reporters", "enable.metrics.push"}
    assert "group.id" not in c.to_dict(include_defaults=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 4 and all("ignored" in w for w in warnings)
    assert any("'group.id'" in w and "a consumer setting" in w for w in warnings)
    assert not any("readers-7f3a" in w or "com.example" in w for w in warnings)


def test_javas_jsse_and_oauth_tuning_keys_are_ignored_and_the_ones_that_would_matter_refused() -> None:
    """A Java TLS or OIDC configuration's keys that choose Java internals are taken and ignored; those whose
    effect cannot be had here (cipher suites, Java classes) are refused with the reason."""
    c = cfg({"ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX",
             "sasl.login.refresh.buffer.seconds": "300", "sasl.oauthbearer.expected.audience": "kafka"})
    assert c.ignored == {"ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "sasl.login.refresh.buffer.seconds",
                         "sasl.oauthbearer.expected.audience"}
    for key, value, reason in (("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "naming suites is not supported"),
                               ("ssl.engine.factory.class", "com.example.Engine", "cannot run here"),
                               ("sasl.login.class", "com.example.Login", "sasl.oauthbearer.token.provider")):
        with pytest.raises(ConfigError, match=reason) as info:
            cfg({key: value})
        assert info.value.key == key


def test_client_dns_lookup_takes_javas_two_modes() -> None:
    assert cfg({"client.dns.lookup": "use_all_dns_ips"}).client_dns_lookup == "use_all_dns_ips"
    canonical = "resolve_canonical_bootstrap_servers_only"
    assert cfg({"client.dns.lookup": canonical.upper()}).client_dns_lookup == canonical
    with pytest.raises(ConfigError, match="expected use_all_dns_ips or resolve_canonical") as info:
        cfg({"client.dns.lookup": "default"})  # Java 2.x's, removed in 3.0
    assert info.value.key == "client.dns.lookup"


def test_unsupported_java_key_says_why() -> None:
    with pytest.raises(ConfigError, match="serialize values before send"):
        cfg({"value.serializer": "org.apache.kafka.common.serialization.StringSerializer"})
    with pytest.raises(ConfigError, match="a Java SSL engine cannot run here") as info:
        cfg({"ssl.engine.factory.class": "com.example.Engine"})
    assert info.value.key == "ssl.engine.factory.class"


def test_java_store_passwords_are_secrets() -> None:
    """Java truststore and keystore settings (see tests/security for what they do): passwords held as Secrets,
    never shown; a keystore and PEM files for the client certificate are one too many."""
    c = cfg({"ssl.truststore.password": "s3cret-pw", "ssl.truststore.type": "jks", "ssl.keystore.type": "pkcs12",
             "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "s3cret-ks"})
    assert isinstance(c.ssl_truststore_password, Secret) and c.ssl_truststore_type == "JKS"
    assert isinstance(c.ssl_keystore_password, Secret) and c.ssl_keystore_type == "PKCS12"
    assert "s3cret-pw" not in repr(c) + str(c) and "s3cret-ks" not in repr(c) + str(c)
    with pytest.raises(ConfigError, match="both name a client certificate") as info:
        cfg({"ssl.keystore.location": "/k.p12", "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"})
    assert info.value.key == "ssl.keystore.location"
    with pytest.raises(ConfigError, match="one of JKS, PKCS12, PEM"):
        cfg({"ssl.keystore.type": "JCEKS"})


@pytest.mark.parametrize("key,value,allowed", [
    ("linger.ms", "soon", "an integer"),
    ("linger.ms", -1, "an integer from 0"),
    ("batch.size", True, "an integer"),
    ("acks", "2", "one of all, -1, 0, 1"),
    ("enable.idempotence", "yes", "true or false"),
    ("compression.type", "brotli", "none, gzip, snappy, lz4, zstd"),
    ("security.protocol", "TLS", "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("max.in.flight.requests.per.connection", 0, "an integer from 1"),
])
def test_bad_value_names_key_value_and_allowed(key: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg({key: value})
    message = str(info.value)
    assert key in message and repr(value) in message and allowed in message
    assert info.value.key == key


def test_case_insensitive_keys_and_duplicates() -> None:
    assert cfg({"Linger.MS": 7}).linger_ms == 7
    with pytest.raises(ConfigError, match="twice"):
        cfg({"linger.ms": 1, "LINGER.MS": 2})


def test_none_means_default() -> None:
    c = cfg({"linger.ms": None, "transactional.id": None})
    assert c.linger_ms == 5 and "linger.ms" not in c.explicitly_set


# ---------------------------------------------------------------------------------------- cross-field rules


def test_implicit_idempotence_turns_off_with_acks_1() -> None:
    assert cfg({"acks": "1"}).enable_idempotence is False
    assert cfg({"retries": 0}).enable_idempotence is False
    assert cfg({"max.in.flight.requests.per.connection": 6}).enable_idempotence is False


@pytest.mark.parametrize("extra,named", [
    ({"acks": "1"}, "acks=1"),
    ({"acks": "0"}, "acks=0"),
    ({"retries": "0"}, "retries=0"),
    ({"max.in.flight.requests.per.connection": "6"}, "max.in.flight.requests.per.connection=6"),
])
def test_explicit_idempotence_conflicts_are_errors(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match="enable.idempotence=true conflicts") as info:
        cfg({"enable.idempotence": "true", **extra})
    assert named in str(info.value)


def test_transactional_id_requires_idempotence() -> None:
    assert cfg({"transactional.id": "tx"}).is_transactional
    with pytest.raises(ConfigError, match="transactional.id needs idempotence"):
        cfg({"transactional.id": "tx", "enable.idempotence": "false"})
    with pytest.raises(ConfigError, match="transactional.id conflicts with acks=1"):
        cfg({"transactional.id": "tx", "acks": "1"})


def test_delivery_timeout_floor() -> None:
    with pytest.raises(ConfigError, match=r"delivery.timeout.ms=1000 must be >= .* \(5 \+ 30000 = 30005\)"):
        cfg({"delivery.timeout.ms": 1000})
    # Not set by the user: raised to the floor, as Java does.
    assert cfg({"linger.ms": 100_000}).delivery_timeout_ms == 130_000
    # The floor is capped at the int32 maximum, as Java's: the largest linger.ms and delivery.timeout.ms go together.
    top = (1 << 31) - 1
    assert cfg({"linger.ms": top, "delivery.timeout.ms": top}).delivery_timeout_ms == top
    assert cfg({"linger.ms": top}).delivery_timeout_ms == top


def test_backoff_max_never_below_base() -> None:
    c = cfg({"retry.backoff.ms": 5000, "reconnect.backoff.ms": 2000})
    assert c.retry_backoff_max_ms == 5000 and c.reconnect_backoff_max_ms == 2000


def test_compression_levels() -> None:
    assert cfg({"compression.type": "zstd", "compression.zstd.level": "7"}).effective_compression_level == 7
    assert cfg({"compression.type": "gzip", "compression.level": 2,
                "compression.gzip.level": 9}).effective_compression_level == 2
    assert cfg({"compression.type": "gzip", "compression.gzip.level": -1}).effective_compression_level is None
    assert cfg({}).effective_compression_level is None


# ---------------------------------------------------------------------------------------- security and secrets

SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "scram-sha-512", "sasl.username": "alice",
        "sasl.password": "hunter2-password"}


def test_sasl_username_password() -> None:
    c = cfg(SASL)
    creds = c.sasl_credentials()
    assert creds is not None and creds.mechanism == "SCRAM-SHA-512" and creds.username == "alice"
    assert creds.password.reveal() == "hunter2-password"
    assert c.uses_ssl and c.uses_sasl


def test_sasl_jaas_config() -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" '
            'password="s3cr\\"et";')
    creds = cfg({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}).sasl_credentials()
    assert creds is not None and (creds.username, creds.password.reveal()) == ("bob", 's3cr"et')
    with pytest.raises(ConfigError, match="not both"):
        cfg({**SASL, "sasl.jaas.config": jaas})


def test_sasl_rules() -> None:
    with pytest.raises(ConfigError, match="sasl.password is missing"):
        cfg({"security.protocol": "SASL_SSL", "sasl.username": "u"})
    with pytest.raises(ConfigError, match="security.protocol=PLAINTEXT"):
        cfg({"sasl.username": "u", "sasl.password": "p"})


def test_secrets_never_appear_in_repr_str_or_errors() -> None:
    password = "hunter2-password"
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{password}";'
    configs = [cfg(SASL), cfg({"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas}),
               cfg({"security.protocol": "SSL", "ssl.key.password": password, "ssl.key.location": "k.pem",
                    "ssl.certificate.location": "c.pem"})]
    for c in configs:
        assert password not in repr(c) and password not in str(c)
        assert "Secret('***')" in repr(c)
    assert repr(Secret(password)) == "Secret('***')" and str(Secret(password)) == "Secret('***')"
    bad_values: list[dict[str, Any]] = [
        {"sasl.password": 12345, **{k: v for k, v in SASL.items() if k != "sasl.password"}},
        {"security.protocol": "SASL_SSL", "sasl.jaas.config": f'no fields here "{password}"'},
    ]
    for bad in bad_values:
        with pytest.raises(ConfigError) as info:
            cfg(bad)
        assert password not in str(info.value) and "12345" not in str(info.value)


def test_tls_options() -> None:
    c = cfg({"security.protocol": "SSL", "ssl.truststore.location": "/ca.pem",
             "ssl.endpoint.identification.algorithm": ""})
    assert c.ssl_cafile == "/ca.pem" and c.ssl_check_hostname is False
    with pytest.raises(ConfigError, match="disagree"):
        cfg({"ssl.check.hostname": "true", "ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(ConfigError, match="both ssl.certificate.location and ssl.key.location"):
        cfg({"ssl.certificate.location": "c.pem"})
    with pytest.raises(ConfigError, match="one of PEM, JKS, JCEKS, PKCS12") as info:
        cfg({"ssl.truststore.type": "BCFKS"})
    assert info.value.key == "ssl.truststore.type"
    assert cfg({"ssl.truststore.type": " "}).ssl_truststore_type is None  # unset: by the file's content


# ---------------------------------------------------------------------------------------- objects and round trips


def fixed_partitioner(topic: str, key: bytes | None, num_partitions: int) -> int:
    return 0


class CountingInterceptor:
    def on_send(self, record: Any) -> Any:
        return record


def test_partitioner_and_interceptors_from_objects_or_dotted_paths() -> None:
    c = cfg({"partitioner.class": fixed_partitioner, "interceptor.classes": [CountingInterceptor()]})
    assert c.partitioner_class is fixed_partitioner and len(c.interceptor_classes) == 1
    c = cfg({"partitioner.class": f"{__name__}.fixed_partitioner",
             "interceptor.classes": f"{__name__}.CountingInterceptor"})
    assert c.partitioner_class is fixed_partitioner
    assert isinstance(c.interceptor_classes[0], CountingInterceptor)
    class WithMethod:
        def partition(self, topic: str, key: bytes | None, n: int) -> int:
            return n - 1

    c = cfg({"partitioner.class": WithMethod()})
    assert c.partitioner_class is not None and c.partitioner_class("t", None, 4) == 3
    with pytest.raises(ConfigError, match="cannot import"):
        cfg({"partitioner.class": "no_such_module_xyz.part"})
    with pytest.raises(ConfigError, match="a callable"):
        cfg({"partitioner.class": 42})


def test_to_dict_round_trip_and_pickle() -> None:
    c = cfg({**SASL, "linger.ms": "20", "transactional.id": "tx-1"})
    assert ProducerConfig.from_dict(c.to_dict()) == c
    assert pickle.loads(pickle.dumps(c)) == c
    assert c.with_overrides({"linger.ms": 0}).linger_ms == 0
    full = c.to_dict(include_defaults=True)
    assert set(full) == {spec.name for spec in OPTIONS}


def test_frozen() -> None:
    c = cfg({})
    with pytest.raises(AttributeError):
        c.linger_ms = 1  # type: ignore[misc]


def test_every_option_documented_in_markdown() -> None:
    table = options_markdown()
    for spec in OPTIONS:
        assert f"`{spec.name}`" in table and spec.doc


def test_a_java_interceptor_class_is_refused_with_what_to_do() -> None:
    """Confluent's monitoring interceptor, as a Java configuration names it: not importable, and the error says
    it is Java and what to give instead (a Python module's failure to import still says so plainly)."""
    with pytest.raises(ConfigError, match="looks like a Java class, which cannot run here: give a Python") as info:
        cfg({"interceptor.classes": "io.confluent.monitoring.clients.interceptor.MonitoringProducerInterceptor"})
    assert info.value.key == "interceptor.classes"
    with pytest.raises(ConfigError, match="cannot import it"):
        cfg({"interceptor.classes": "no_such_module.Interceptor"})


@pytest.mark.parametrize(("codec", "module"), [("zstd", "zstandard"), ("snappy", "cramjam")])
def test_a_codec_whose_package_is_missing_is_refused_when_configured(monkeypatch: pytest.MonkeyPatch, codec: str,
                                                                       module: str) -> None:
    """Before, the producer was built and the sender thread failed on every batch it tried to build: sends timed out
    and close() never returned. The sink's options (checked on the driver) say it as well."""
    from spark_kafka_sink.spark.options import SinkOptions

    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    with pytest.raises(ConfigError, match=f"compression.type={codec} needs the optional package '{module}'"):
        cfg({"compression.type": codec})
    with pytest.raises(ConfigError, match=f"needs the optional package '{module}'"):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.compression.type": codec},
                          streaming=False)
    cfg({"compression.type": "lz4"})  # the required codecs need nothing more
