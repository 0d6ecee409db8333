"""What a truststore file is, by its first bytes (the full reading is in tests/security/test_settings.py)."""

from __future__ import annotations

import pytest

from spark_kafka_sink.net.truststore import store_kind


@pytest.mark.parametrize(("head", "kind"), [
    (b"\xfe\xed\xfe\xed\x00\x00\x00\x02", "JKS"),
    (b"\xce\xce\xce\xce\x00\x00\x00\x02", "JCEKS"),
    (b"\x30\x82\x04\x72\x02\x01\x03\x30", "PKCS12"),  # SEQUENCE (long length), then INTEGER 3: a PFX
    (b"\x30\x81\x90\x02\x01\x03\x30\x81", "PKCS12"),
    (b"\x30\x82\x01\x8b\x30\x82\x01\x31", None),  # SEQUENCE, then SEQUENCE: a DER certificate
    (b"-----BEGIN CERTIFICATE-----", None),
    (b"\x30", None),
    (b"", None),
])
def test_store_kind_by_the_first_bytes(head: bytes, kind: str | None) -> None:
    assert store_kind(head) == kind
