"""API version negotiation from an ApiVersions response, sans-IO.

The client sends ApiVersions first on every connection; :func:`parse_api_versions` turns the answer into
:class:`BrokerVersions`, and :func:`select_version` picks, per API, the highest version both sides implement.
Finalized features (e.g. ``transaction.version``, which decides between the two transaction protocols) come
from the same response.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_sink.errors import BrokerUnsupportedVersionError, UnsupportedVersionError, raise_for_code
from spark_kafka_sink.protocol.messages import API_VERSIONS, ApiSpec

__all__ = [
    "BrokerVersions",
    "select_version",
    "parse_api_versions",
    "api_versions_retry_version",
    "api_versions_request",
    "transaction_version",
]

# ApiVersions v3+ client software name/version must match this, or the broker answers INVALID_REQUEST.
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@dataclass(frozen=True)
class BrokerVersions:
    """What one broker supports, from its ApiVersions response.

    ``api_versions``: API key -> (min, max). ``supported_features``: feature -> (min, max) this broker can run.
    ``finalized_features``: feature -> (min_level, max_level) the cluster runs at; valid when
    ``finalized_features_epoch >= 0``.
    """

    api_versions: Mapping[int, tuple[int, int]]
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized_features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    finalized_features_epoch: int = -1

    def select(self, api: ApiSpec) -> int:
        """Shorthand for ``select_version(api, self.api_versions)``."""
        return select_version(api, self.api_versions)


def select_version(api: ApiSpec, broker: Mapping[int, tuple[int, int]]) -> int:
    """The highest version of ``api`` both this client and the broker implement.

    Raises UnsupportedVersionError naming the API and both ranges when there is none (typically: the broker is
    older than this client supports) or when the broker does not offer the API at all.
    """
    ours = f"v{api.min_version}-{api.max_version}"
    if api.key not in broker:
        raise UnsupportedVersionError(
            f"the broker does not offer {api.name} (API key {api.key}); this client needs {ours}. "
            "The broker is probably too old (or the API is disabled on this listener)."
        )
    lo, hi = broker[api.key]
    best = min(hi, api.max_version)
    if best < max(lo, api.min_version):
        too = "old" if hi < api.min_version else "new"
        raise UnsupportedVersionError(
            f"no common {api.name} version: this client speaks {ours}, the broker v{lo}-{hi}. "
            f"The broker is too {too} for this client."
        )
    return best


def parse_api_versions(body: Mapping[str, Any]) -> BrokerVersions:
    """Turn a decoded ApiVersions response into BrokerVersions; raises the broker's error if it sent one.

    On UNSUPPORTED_VERSION, first use :func:`api_versions_retry_version` to ask again at a version the broker
    knows.
    """
    raise_for_code(body["error_code"], context="ApiVersions")
    apis = {int(a["api_key"]): (int(a["min_version"]), int(a["max_version"])) for a in body["api_keys"]}
    supported = {f["name"]: (int(f["min_version"]), int(f["max_version"])) for f in body["supported_features"]}
    finalized = {
        f["name"]: (int(f["min_version_level"]), int(f["max_version_level"])) for f in body["finalized_features"]
    }
    return BrokerVersions(apis, supported, finalized, int(body["finalized_features_epoch"]))


def api_versions_retry_version(body: Mapping[str, Any]) -> int | None:
    """After an ApiVersions answer with UNSUPPORTED_VERSION: the version to ask again with, else None.

    The broker lists its own ApiVersions range in that answer; we take the highest version both sides know.
    """
    if body.get("error_code") != BrokerUnsupportedVersionError.code:
        return None
    for entry in body.get("api_keys") or ():
        if entry["api_key"] == API_VERSIONS.key:
            best = min(int(entry["max_version"]), API_VERSIONS.max_version)
            return best if best >= API_VERSIONS.min_version else None
    return 0  # no range listed: v0 is what every broker understands


def api_versions_request(version: int, software_name: str, software_version: str) -> dict[str, Any]:
    """An ApiVersions request body; v3+ carries the client's name and version, cleaned to the allowed pattern."""
    if version < 3:
        return {}
    return {
        "client_software_name": _clean_software_field(software_name, "spark-kafka-sink"),
        "client_software_version": _clean_software_field(software_version, "unknown"),
    }


def _clean_software_field(value: str, fallback: str) -> str:
    # Replace characters the broker refuses and trim non-alphanumerics at the ends, rather than fail the
    # connection over a cosmetic string (e.g. a version like "0.1.0+local").
    cleaned = re.sub(r"[^a-zA-Z0-9\-.]", "-", value).strip("-.")
    return cleaned if _SOFTWARE_PATTERN.fullmatch(cleaned) else fallback


def transaction_version(versions: BrokerVersions) -> int:
    """The cluster's finalized ``transaction.version`` level (0 when not finalized: the classic protocol).

    Level 2 enables the KIP-890 protocol (Produce v12 adds partitions implicitly, EndTxn v5 bumps the epoch).
    """
    if versions.finalized_features_epoch < 0:
        return 0
    return versions.finalized_features.get("transaction.version", (0, 0))[1]
