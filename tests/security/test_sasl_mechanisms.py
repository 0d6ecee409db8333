"""SASL mechanisms, sans-IO: exact bytes against RFC vectors, and every way a server can get it wrong."""

from __future__ import annotations

import base64
import pickle

import pytest

from spark_kafka_sink.errors import ConfigError, IllegalSaslStateError, SaslAuthenticationFailedError
from spark_kafka_sink.protocol.sasl import (
    SCRAM_MIN_ITERATIONS,
    PlainClient,
    SaslVerificationError,
    ScramClient,
    ScramState,
    plain_initial_response,
    sasl_client,
    saslname,
)

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
FULL_NONCE = CLIENT_NONCE + "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = "W22ZaJ0SNY7soEsUEjb6gQ=="
SERVER_FIRST = f"r={FULL_NONCE},s={SALT},i=4096".encode()
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
# The same exchange with SHA-512. Derived once and cross-checked with the openssl CLI (openssl kdf PBKDF2 +
# openssl dgst -hmac), then pinned; the live broker test proves SHA-512 end to end as well.
SHA512_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
)
SHA512_SERVER_FINAL = (
    b"v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw=="
)


def _after_first(mechanism: str = "SCRAM-SHA-256", username: str = "user") -> ScramClient:
    client = ScramClient(mechanism, username, "pencil", nonce=CLIENT_NONCE)
    client.initial_response()
    return client


# -- golden vectors ---------------------------------------------------------------------------------------------

def test_rfc7677_scram_sha256_exact_bytes() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.respond(SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert client.state is ScramState.CLIENT_FINAL_SENT and not client.complete
    assert client.respond(RFC7677_SERVER_FINAL) is None
    assert client.complete


def test_scram_sha512_pinned_vector() -> None:
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.respond(SERVER_FIRST) == SHA512_CLIENT_FINAL
    assert client.respond(SHA512_SERVER_FINAL) is None
    assert client.complete


# The RFC 7677 exchange with a delegation token (Java's ScramLoginModule tokenauth=true): client-first carries the
# tokenauth extension, and so the auth message both proofs sign. Computed once with the openssl CLI (openssl kdf
# PBKDF2, openssl dgst -hmac over "n=user,r=...,tokenauth=true,<server-first>,c=biws,r=..."), then pinned.
TOKEN_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=xrt7QLC27If+yCZ8tl7Arjdh2LzbxDoYIVOtWUkqn3w="
)
TOKEN_SERVER_FINAL = b"v=wd2QaUOhFVV12I4FjBHC9GczfNvvSFFqpFU23bW5PvE="


def test_delegation_token_exchange_exact_bytes() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE, token_auth=True)
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO,tokenauth=true"
    assert client.respond(SERVER_FIRST) == TOKEN_CLIENT_FINAL
    # The signature of the exchange without the extension does not verify: the extension is signed.
    assert TOKEN_SERVER_FINAL != RFC7677_SERVER_FINAL
    assert client.respond(TOKEN_SERVER_FINAL) is None
    assert client.complete


def test_plain_initial_response_exact_bytes() -> None:
    assert plain_initial_response("alice", "alice-secret") == b"\x00alice\x00alice-secret"
    assert plain_initial_response("bob", "p\u00e4ss", authzid="admin") == b"admin\x00bob\x00p\xc3\xa4ss"
    client = PlainClient("alice", "alice-secret")
    assert client.initial_response() == b"\x00alice\x00alice-secret"
    assert client.respond(b"") is None and client.complete


def test_server_first_with_extensions_is_accepted() -> None:
    # RFC 5802 allows extensions after i=; a client ignores the ones it does not know.
    client = _after_first()
    assert client.respond(SERVER_FIRST + b",x=future") is not None


# -- saslname escaping ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "escaped"), [
    ("alice", "alice"), ("a,b", "a=2Cb"), ("a=b", "a=3Db"), ("=,", "=3D=2C"), ("=2C", "=3D2C"),
])
def test_saslname_escaping(name: str, escaped: str) -> None:
    assert saslname(name) == escaped
    client = ScramClient("SCRAM-SHA-256", name, "pw", nonce="abc")
    assert client.initial_response() == f"n,,n={escaped},r=abc".encode()


# -- a server that gets it wrong ----------------------------------------------------------------------------------

def test_wrong_server_signature_is_a_possible_mitm() -> None:
    client = _after_first()
    client.respond(SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    mitm = "server signature did not verify: possible man-in-the-middle"
    with pytest.raises(SaslAuthenticationFailedError, match=mitm):
        client.respond(forged)
    assert client.state is ScramState.FAILED and not client.complete


def test_signature_of_other_mechanism_does_not_verify() -> None:
    client = _after_first("SCRAM-SHA-512")
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslVerificationError, match="did not verify"):
        client.respond(RFC7677_SERVER_FINAL)


def test_server_error_in_server_final_is_surfaced() -> None:
    client = _after_first()
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.respond(b"e=invalid-proof")


def test_server_error_in_server_first_is_surfaced() -> None:
    client = _after_first()
    with pytest.raises(SaslAuthenticationFailedError, match="unknown-user"):
        client.respond(b"e=unknown-user")


@pytest.mark.parametrize(("server_first", "reason"), [
    (f"r=someoneelse{FULL_NONCE},s={SALT},i=4096", "does not extend the client nonce"),
    (f"r={CLIENT_NONCE},s={SALT},i=4096", "does not extend the client nonce"),  # nothing added by the server
    (f"r={FULL_NONCE},s={SALT},i=4095", "below the safe minimum"),
    (f"r={FULL_NONCE},s={SALT},i=1", "below the safe minimum"),
    (f"r={FULL_NONCE},s=not*base64,i=4096", "salt is not base64"),
    (f"r={FULL_NONCE},s=,i=4096", "salt is empty"),
    (f"r={FULL_NONCE},s={SALT},i=abc", "not a number"),
    (f"r={FULL_NONCE},i=4096,s={SALT}", "expected r=, s=, i="),
    (f"r={FULL_NONCE},s={SALT}", "expected r=, s=, i="),
    (f"m=ext,r={FULL_NONCE},s={SALT},i=4096", "extension"),
    ("garbage", "attr=value"),
    ("", "attr=value"),
])
def test_bad_server_first_fails(server_first: str, reason: str) -> None:
    client = _after_first()
    with pytest.raises(SaslAuthenticationFailedError, match=reason):
        client.respond(server_first.encode())
    assert client.state is ScramState.FAILED


def test_non_utf8_server_message_fails() -> None:
    with pytest.raises(SaslVerificationError, match="not UTF-8"):
        _after_first().respond(b"\xff\xfe")


def test_minimum_iterations_is_kafkas() -> None:
    assert SCRAM_MIN_ITERATIONS == 4096


@pytest.mark.parametrize("server_final", [b"", b"v=***", b"x=1", b"v"])
def test_malformed_server_final_fails(server_final: bytes) -> None:
    client = _after_first()
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslVerificationError, match="malformed"):
        client.respond(server_final)


# -- state machine ------------------------------------------------------------------------------------------------

def test_scram_out_of_order_steps_raise_named_errors() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    with pytest.raises(IllegalSaslStateError):
        client.respond(SERVER_FIRST)  # nothing sent yet
    client.initial_response()
    with pytest.raises(IllegalSaslStateError):
        client.initial_response()
    client.respond(SERVER_FIRST)
    client.respond(RFC7677_SERVER_FINAL)
    with pytest.raises(IllegalSaslStateError):
        client.respond(RFC7677_SERVER_FINAL)  # complete: no further tokens


def test_plain_out_of_order_steps_raise_named_errors() -> None:
    client = PlainClient("alice", "secret")
    with pytest.raises(IllegalSaslStateError):
        client.respond(b"")
    client.initial_response()
    with pytest.raises(IllegalSaslStateError):
        client.initial_response()


# -- construction and secrets -------------------------------------------------------------------------------------

def test_sasl_client_factory() -> None:
    assert isinstance(sasl_client("plain", "a", "b"), PlainClient)
    assert sasl_client("scram-sha-512", "a", "b").mechanism == "SCRAM-SHA-512"
    assert sasl_client("SCRAM-SHA-512", "a", "b", token_auth=True).initial_response().endswith(b",tokenauth=true")
    assert not sasl_client("SCRAM-SHA-512", "a", "b").initial_response().endswith(b",tokenauth=true")
    with pytest.raises(ConfigError, match="GSSAPI.*not supported") as info:
        sasl_client("GSSAPI", "a", "b")
    assert info.value.key == "sasl.mechanism"


def test_bad_credentials_are_config_errors_without_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        plain_initial_response("alice", "pass\x00word-XYZZY")
    assert "XYZZY" not in str(info.value) and "password" in str(info.value)
    with pytest.raises(ConfigError):
        ScramClient("SCRAM-SHA-256", "", "pw")


def test_random_nonces_are_fresh_and_printable() -> None:
    first = [ScramClient("SCRAM-SHA-256", "u", "p").initial_response() for _ in range(20)]
    assert len(set(first)) == 20
    for message in first:
        nonce = message.split(b",r=", 1)[1]
        assert len(nonce) >= 24 and b"," not in nonce and all(0x21 <= c <= 0x7E for c in nonce)


def test_no_secret_in_repr_or_errors() -> None:
    secret = "hunter2-XYZZY"
    scram = ScramClient("SCRAM-SHA-256", "user", secret, nonce=CLIENT_NONCE)
    plain = PlainClient("user", secret)
    assert secret not in repr(scram) and secret not in repr(plain)
    scram.initial_response()
    scram.respond(SERVER_FIRST)
    assert secret not in repr(vars(scram))  # the password is dropped once the proof is computed
    with pytest.raises(SaslVerificationError) as info:
        scram.respond(b"v=" + base64.b64encode(b"x" * 32))
    assert secret not in str(info.value) and secret not in repr(info.value)


def test_verification_error_pickles_and_is_fatal() -> None:
    reason = "server signature did not verify: possible man-in-the-middle"
    error = SaslVerificationError(reason, context="SCRAM-SHA-256")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) == (
        "SASL authentication failed in SCRAM-SHA-256: server signature did not verify: possible man-in-the-middle"
    )
    assert again.fatal and not again.retriable
