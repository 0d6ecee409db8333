"""Parsing the Java client's sasl.jaas.config, without ever echoing it (it holds the password)."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.protocol.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    jaas_credentials,
    parse_jaas_config,
)

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'


def test_plain_login_module() -> None:
    module = parse_jaas_config(PLAIN)
    assert module.class_name == PLAIN_LOGIN_MODULE
    assert module.control_flag == "required"
    assert dict(module.options) == {"username": "alice", "password": "alice-secret"}
    assert jaas_credentials(PLAIN, "PLAIN") == ("alice", "alice-secret", False)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_module(mechanism: str) -> None:
    assert jaas_credentials(SCRAM, mechanism) == ("alice", "alice-secret", False)


@pytest.mark.parametrize(("text", "expected"), [
    # escapes inside double quotes
    (f'{SCRAM_LOGIN_MODULE} required username="a\\"b" password="c\\\\d";', ("a\"b", "c\\d")),
    # single quotes, spaces and ';' inside a quoted value
    (f"{SCRAM_LOGIN_MODULE} required username='al ice' password='p;w=\"x\"';", ("al ice", 'p;w="x"')),
    # bare words, extra whitespace and newlines, other options, comments
    (f"  {SCRAM_LOGIN_MODULE}\n  REQUIRED\n username=alice /* who */ tokenauth=false\n"
     f" // the password:\n password=\"s3cr3t\" ;  ", ("alice", "s3cr3t")),
    # options in any order; '=' with spaces
    (f'{SCRAM_LOGIN_MODULE} optional password = "pw" username = "u";', ("u", "pw")),
    # octal and control escapes, as Java's StreamTokenizer reads them
    (f'{SCRAM_LOGIN_MODULE} required username="u" password="a\\101\\tb";', ("u", "aA\tb")),
    # non-ASCII
    (f'{SCRAM_LOGIN_MODULE} required username="j\u00fcrgen" password="\u00fcber";', ("j\u00fcrgen", "\u00fcber")),
])
def test_quoting_escapes_and_layout(text: str, expected: tuple[str, str]) -> None:
    assert jaas_credentials(text, "SCRAM-SHA-256") == (*expected, False)


@pytest.mark.parametrize(("option", "mechanism", "token_auth"), [
    ('tokenauth="true"', "SCRAM-SHA-512", True),
    ("tokenauth=TRUE", "SCRAM-SHA-256", True),  # Java: "true".equalsIgnoreCase
    ('tokenauth="false"', "SCRAM-SHA-512", False),
    ('tokenauth="yes"', "SCRAM-SHA-512", False),  # anything but true is false, as in Java
    ("", "SCRAM-SHA-512", False),
])
def test_scram_tokenauth_marks_a_delegation_token(option: str, mechanism: str, token_auth: bool) -> None:
    # Kafka's documented client setting for a delegation token: its id and HMAC as username and password.
    text = f'{SCRAM_LOGIN_MODULE} required username="tokenID123" password="lAYYSFmLs4bTjf+lTZ1LCHR/ZZFNA==" {option};'
    credentials = jaas_credentials(text, mechanism)
    assert credentials == ("tokenID123", "lAYYSFmLs4bTjf+lTZ1LCHR/ZZFNA==", token_auth)
    assert credentials.token_auth is token_auth


def test_plain_login_module_ignores_tokenauth() -> None:
    # PlainLoginModule has no such option (Java ignores unknown options): PLAIN never announces a token.
    text = f'{PLAIN_LOGIN_MODULE} required username="alice" password="alice-secret" tokenauth="true";'
    assert jaas_credentials(text, "PLAIN").token_auth is False


SECRET = "TopSecret-XYZZY"


@pytest.mark.parametrize(("text", "reason"), [
    (f'{SCRAM_LOGIN_MODULE} required username="alice";', "no password option"),
    (f'{SCRAM_LOGIN_MODULE} required password="{SECRET}";', "no username option"),
    (f'{SCRAM_LOGIN_MODULE} required username="alice" password="{SECRET}"', "must end with ';'"),
    (f'{SCRAM_LOGIN_MODULE} username="alice" password="{SECRET}";', "control flag"),
    (f'{SCRAM_LOGIN_MODULE} required username="alice" password="{SECRET};', "unterminated quoted value"),
    (f'{SCRAM_LOGIN_MODULE} required username="alice" password={SECRET} more words;', "must be followed by '='"),
    (f'{SCRAM_LOGIN_MODULE} required username="a" password="{SECRET}" password="{SECRET}";', "given twice"),
    (f'{SCRAM_LOGIN_MODULE} required username="a" password=;', "has no value"),
    (f'{SCRAM_LOGIN_MODULE} required username="a" password="{SECRET}"; {SCRAM_LOGIN_MODULE} required;',
     "exactly one login module"),
    ("", "exactly one login module"),
    (f'{SCRAM_LOGIN_MODULE} required username="a" password="{SECRET}" /* unclosed', "unterminated /\\* comment"),
    (f'{SCRAM_LOGIN_MODULE} required username="a" @password="{SECRET}";', "unexpected character"),
    (f'{PLAIN_LOGIN_MODULE} required username="a" password="{SECRET}";', "needs the login module"),
    (f'{SECRET} required username="a" password="{SECRET}";', "another login module"),
])
def test_errors_name_the_key_and_never_echo_the_text(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        jaas_credentials(text, "SCRAM-SHA-256")
    assert info.value.key == "sasl.jaas.config"
    message = str(info.value)
    assert message.startswith("sasl.jaas.config: ")
    assert SECRET not in message and "XYZZY" not in message and "more" not in message
    assert SECRET not in repr(info.value)


def test_plain_mechanism_needs_the_plain_module() -> None:
    with pytest.raises(ConfigError, match="needs the login module .*PlainLoginModule"):
        jaas_credentials(SCRAM, "PLAIN")


def test_repr_hides_the_password() -> None:
    module = parse_jaas_config(SCRAM.replace("alice-secret", SECRET))
    assert SECRET not in repr(module) and SECRET not in str(module)
    assert "alice" in repr(module)
