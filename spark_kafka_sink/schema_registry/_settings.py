"""The registry client's settings, parsed once from the names Confluent's Python client uses (``url``,
``basic.auth.user.info``, ``ssl.ca.location`` ...): the Spark sink passes its ``schema.registry.*`` options here
without the prefix, the standalone producer's serializer its dict."""

from __future__ import annotations

import difflib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.secret import Secret

__all__ = ["RegistrySettings", "REGISTRY_SETTING_NAMES"]

#: Every setting, with what it holds (the docs' options page lists the same).
REGISTRY_SETTING_NAMES = {
    "url": "the registry's base URL (several, comma-separated, are tried in turn)",
    "basic.auth.credentials.source": "USER_INFO (default: basic.auth.user.info) or URL (the URL's user:password@)",
    "basic.auth.user.info": "user:password for HTTP basic authentication (a secret: never logged)",
    "ssl.ca.location": "a PEM file of the CAs to trust (default: the system's); certificates are always verified",
    "ssl.certificate.location": "a PEM client certificate, for registries that ask for one",
    "ssl.key.location": "its PEM private key",
    "ssl.key.password": "the key's password (a secret)",
    "timeout": "seconds to wait for one answer (default 10)",
    "max.retries": "retries of a request that got no answer or a 5xx/429 (default 3)",
    "retries.wait.ms": "the first retry's backoff, doubled each time (default 1000)",
    "retries.max.wait.ms": "the longest backoff (default 20000)",
}


@dataclass(frozen=True)
class RegistrySettings:
    urls: tuple[str, ...]  # without user info
    user_info: Secret | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: Secret | None = None
    timeout_s: float = 10.0
    max_retries: int = 3
    retry_wait_ms: int = 1000
    retry_max_wait_ms: int = 20000
    # Where the credentials come from, as the user spelled it: what a refused request's error names.
    credentials_setting: str = "basic.auth.user.info"

    @classmethod
    def from_config(cls, config: Mapping[str, str], *, prefix: str = "") -> RegistrySettings:
        """Parse ``config`` (keys as in :data:`REGISTRY_SETTING_NAMES`); ``prefix`` is how the user spelled them
        (``schema.registry.`` in the sink's options), for error messages."""
        values = {key.strip().lower(): str(value) for key, value in config.items()}
        for key in values:
            if key not in REGISTRY_SETTING_NAMES:
                near = difflib.get_close_matches(key, REGISTRY_SETTING_NAMES, n=1)
                hint = f"; did you mean {prefix}{near[0]}?" if near else ""
                raise ConfigError(f"unknown schema registry option {prefix}{key}{hint}", key=prefix + key)
        if not values.get("url", "").strip():
            raise ConfigError(f"{prefix}url is required: the schema registry's URL", key=prefix + "url")
        urls, url_info = [], None
        for raw in values["url"].split(","):
            parts = urllib.parse.urlsplit(raw.strip())
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"{prefix}url must be http(s)://host[:port][/path], got {_redacted(raw)!r}",
                                  key=prefix + "url")
            if parts.username is not None:
                url_info = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            urls.append(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")))
        source = values.get("basic.auth.credentials.source", "USER_INFO" if "basic.auth.user.info" in values
                            else "URL").upper()
        if source not in ("USER_INFO", "URL"):
            raise ConfigError(f"{prefix}basic.auth.credentials.source must be USER_INFO or URL, got {source!r}",
                              key=prefix + "basic.auth.credentials.source")
        user_info = values.get("basic.auth.user.info") if source == "USER_INFO" else url_info
        if user_info is not None and ":" not in user_info:
            raise ConfigError(f"{prefix}basic.auth.user.info must be user:password",
                              key=prefix + "basic.auth.user.info")
        return cls(
            urls=tuple(urls),
            user_info=None if user_info is None else Secret(user_info),
            ca_location=values.get("ssl.ca.location"),
            certificate_location=values.get("ssl.certificate.location"),
            key_location=values.get("ssl.key.location"),
            key_password=Secret(values["ssl.key.password"]) if "ssl.key.password" in values else None,
            timeout_s=_number(values, "timeout", 10.0, prefix),
            max_retries=int(_number(values, "max.retries", 3, prefix)),
            retry_wait_ms=int(_number(values, "retries.wait.ms", 1000, prefix)),
            retry_max_wait_ms=int(_number(values, "retries.max.wait.ms", 20000, prefix)),
            credentials_setting=(f"the user:password in {prefix}url ({prefix}basic.auth.credentials.source=URL)"
                                 if source == "URL" and (url_info is not None or "basic.auth.credentials.source"
                                                         in values) else f"{prefix}basic.auth.user.info"),
        )


def _number(values: Mapping[str, str], key: str, default: float, prefix: str) -> float:
    if key not in values:
        return default
    try:
        number = float(values[key])
    except ValueError:
        number = -1.0
    if number < 0:
        raise ConfigError(f"{prefix}{key} must be a number >= 0, got {values[key]!r}", key=prefix + key)
    return number


def _redacted(url: str) -> str:
    parts = urllib.parse.urlsplit(url.strip())
    if parts.username is None:
        return url.strip()
    return urllib.parse.urlunsplit((parts.scheme, "***@" + (parts.hostname or ""), parts.path, "", ""))
