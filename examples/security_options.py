"""Security settings as option maps: the same keys for the Python producer, and with ``kafka.`` for Spark.

Each function returns the producer configuration for one kind of cluster; ``spark_options`` prefixes it for a
Spark write. Nothing here connects: pass the maps to ``KafkaProducer`` or to ``.options(**...)``.
"""

from __future__ import annotations


# --8<-- [start:sasl-ssl]
def scram_over_tls(bootstrap_servers: str, user: str, password: str, ca_file: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,                   # or Java's sasl.jaas.config (ScramLoginModule ...)
        "sasl.password": password,               # never logged, never in errors or reprs
        "ssl.ca.location": ca_file,              # or ssl.truststore.location (PEM, JKS, PKCS12); unset: system CAs
    }
# --8<-- [end:sasl-ssl]


# --8<-- [start:mtls]
def mutual_tls(bootstrap_servers: str, keystore: str, keystore_password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.keystore.location": keystore,       # JKS or PKCS12 as a Java client has it, or PEM
        "ssl.keystore.password": keystore_password,
    }
# --8<-- [end:mtls]


# --8<-- [start:oauth]
def oauth_client_credentials(bootstrap_servers: str, token_url: str, client_id: str, secret: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.oauthbearer.client.credentials.client.id": client_id,
        "sasl.oauthbearer.client.credentials.client.secret": secret,
    }
# --8<-- [end:oauth]


# --8<-- [start:kerberos]
def kerberos_keytab(bootstrap_servers: str, keytab: str, principal: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.jaas.config": ("com.sun.security.auth.module.Krb5LoginModule required "
                             f'useKeyTab=true keyTab="{keytab}" principal="{principal}";'),
    }
# --8<-- [end:kerberos]


# --8<-- [start:spark]
def spark_options(config: dict[str, str]) -> dict[str, str]:
    """The same settings for ``df.write.format("pykafka-sink").options(**spark_options(config))``."""
    return {f"kafka.{key}": value for key, value in config.items()}
# --8<-- [end:spark]
