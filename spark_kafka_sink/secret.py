"""``Secret``: a password-like setting that never shows itself, shared by every layer that carries one.

    password = Secret("hunter2")
    repr(password), str(password)      # "Secret('***')" both: safe in logs, reprs and error messages
    password.reveal()                  # "hunter2": only where the value is used (SASL token, TLS key loading)

The producer's config (``sasl.password``, ``sasl.jaas.config``, ``ssl.key.password`` ...), the network layer's
``NetConfig`` and its security settings all hold the same ``Secret`` object, so nothing between the user's dict and
the handshake turns it back into text. It lives beside :mod:`spark_kafka_sink.errors` because both the ``net`` and
the ``producer`` layers need it and ``net`` must not import ``producer``.
"""

from __future__ import annotations

import hmac

__all__ = ["Secret", "is_secret_name"]


class Secret:
    """A password-like string that never shows itself: ``repr`` and ``str`` are ``Secret('***')``.

    ``reveal()`` returns the value, for the one place that must send it (SASL, TLS key loading). Equality compares
    the values in constant time. Pickles with its value (Spark ships the config to executors)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return (Secret, (self._value,))


# Key material given inline as PEM text (KIP-651), which Java types as passwords too.
_PEM_VALUES = ("ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates")


def is_secret_name(name: str) -> bool:
    """Keys whose values must never be printed: anything about passwords, secrets or JAAS login config, and inline
    PEM key material."""
    lowered = name.lower()
    return any(word in lowered for word in ("password", "secret", "jaas")) or lowered.strip().endswith(_PEM_VALUES)
