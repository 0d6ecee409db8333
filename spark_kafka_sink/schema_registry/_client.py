"""A small client of the Confluent schema registry API (Confluent's registry, Apicurio's ccompat API, Karapace):
register, look up, latest version, schema by id, compatibility level.

Requests that get no answer, a 5xx or a 429 are retried with exponential backoff (``retries.wait.ms`` doubling up
to ``retries.max.wait.ms``, ``max.retries`` times), trying each URL in turn; then
:class:`SchemaRegistryUnavailableError`. A refused schema is :class:`IncompatibleSchemaError` carrying the
registry's message and the subject's compatibility level. TLS certificates are always verified. Credentials go in
the Authorization header only: never in a message or a log line.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import IncompatibleSchemaError, SchemaRegistryError, SchemaRegistryUnavailableError
from spark_kafka_sink.schema_registry._settings import RegistrySettings

__all__ = ["SchemaRegistryClient", "RegisteredSchema"]

log = logging.getLogger(__name__)
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RegisteredSchema:
    schema_id: int
    version: int | None
    schema: str
    schema_type: str  # AVRO, PROTOBUF or JSON


class SchemaRegistryClient:
    """One registry (its URLs tried in turn). ``sleep`` is the backoff's wait, a seam for tests."""

    def __init__(self, settings: RegistrySettings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        self._context: ssl.SSLContext | None = None
        if any(url.startswith("https:") for url in settings.urls):
            self._context = ssl.create_default_context(cafile=settings.ca_location)
            if settings.certificate_location:
                self._context.load_cert_chain(
                    settings.certificate_location, settings.key_location,
                    settings.key_password.reveal() if settings.key_password else None)

    # ------------------------------------------------------------------------------------------------- API

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> int:
        """Register ``schema`` under ``subject`` (a no-op returning the id when it is there already): its id."""
        try:
            answer = self._request("POST", f"/subjects/{_quote(subject)}/versions",
                                   _schema_body(schema, schema_type), subject=subject)
        except SchemaRegistryError as e:
            if e.status != 409:
                raise
            level = self.compatibility(subject)
            raise IncompatibleSchemaError(
                f"the schema registry refused the schema for subject {subject!r} under its {level} compatibility: "
                f"{e.args[0]}. Make the change {level}-compatible (e.g. give a new field a default) or write "
                "under another subject", status=409, error_code=e.error_code, subject=subject) from None
        return int(answer["id"])

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> RegisteredSchema | None:
        """The registered version of ``schema`` under ``subject``, or None if it is not registered there."""
        try:
            answer = self._request("POST", f"/subjects/{_quote(subject)}", _schema_body(schema, schema_type),
                                   subject=subject)
        except SchemaRegistryError as e:
            if e.status == 404:
                return None
            raise
        return _registered(answer, schema_type)

    def latest(self, subject: str) -> RegisteredSchema:
        """The subject's latest version."""
        return _registered(self._request("GET", f"/subjects/{_quote(subject)}/versions/latest", subject=subject),
                           "AVRO")

    def by_id(self, schema_id: int) -> RegisteredSchema:
        answer = self._request("GET", f"/schemas/ids/{int(schema_id)}")
        return RegisteredSchema(int(schema_id), None, str(answer["schema"]), str(answer.get("schemaType", "AVRO")))

    def compatibility(self, subject: str | None = None) -> str:
        """The subject's compatibility level (the global one where the subject has none)."""
        if subject is not None:
            try:
                answer = self._request("GET", f"/config/{_quote(subject)}?defaultToGlobal=true", subject=subject)
                return str(answer.get("compatibilityLevel") or answer.get("compatibility"))
            except SchemaRegistryError as e:
                if e.status != 404:
                    raise
        answer = self._request("GET", "/config")
        return str(answer.get("compatibilityLevel") or answer.get("compatibility"))

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        path = "/config" if subject is None else f"/config/{_quote(subject)}"
        self._request("PUT", path, {"compatibility": level.upper()}, subject=subject)

    # ------------------------------------------------------------------------------------------------ HTTP

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                 subject: str | None = None) -> Any:
        settings = self.settings
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": _CONTENT_TYPE}
        if data is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        if settings.user_info is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(settings.user_info.reveal().encode()).decode()
        wait_ms = float(settings.retry_wait_ms)
        last = ""
        for attempt in range(settings.max_retries + 1):
            for base in settings.urls:
                request = urllib.request.Request(base + path, data=data, headers=headers, method=method)
                try:
                    with urllib.request.urlopen(request, timeout=settings.timeout_s, context=self._context) as resp:
                        text = resp.read().decode()
                        return json.loads(text) if text else {}
                except urllib.error.HTTPError as e:
                    error = _registry_error(e, method, base + path, subject, settings)
                    if e.code not in _RETRIED_STATUS:
                        raise error from None
                    last = str(error)
                except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                    reason = getattr(e, "reason", e)
                    if isinstance(reason, ssl.SSLCertVerificationError):  # lasting: no retry
                        raise SchemaRegistryError(
                            f"the schema registry at {base} has a certificate that is not trusted "
                            f"({reason.verify_message}): set ssl.ca.location to the CA that signed it",
                            subject=subject) from None
                    last = f"{method} {base}{path}: {reason}"
            if attempt < settings.max_retries:
                log.warning("schema registry: no answer (%s); retry %d of %d in %.0f ms", last, attempt + 1,
                            settings.max_retries, wait_ms)
                self._sleep(wait_ms / 1000)
                wait_ms = min(wait_ms * 2, settings.retry_max_wait_ms)
        raise SchemaRegistryUnavailableError(
            f"the schema registry did not answer after {settings.max_retries + 1} attempts (last: {last}); check "
            f"that it runs at {', '.join(settings.urls)} and try again", subject=subject)


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(schema: str, schema_type: str) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    return body


def _registered(answer: Any, schema_type: str) -> RegisteredSchema:
    return RegisteredSchema(int(answer["id"]), int(answer["version"]) if "version" in answer else None,
                            str(answer.get("schema", "")), str(answer.get("schemaType", schema_type)))


def _registry_error(e: urllib.error.HTTPError, method: str, url: str, subject: str | None,
                    settings: RegistrySettings) -> SchemaRegistryError:
    try:
        payload = json.loads(e.read().decode() or "{}")
    except (ValueError, OSError):
        payload = {}
    finally:
        e.close()  # its connection: left open it would outlive the error
    message = str(payload.get("message") or e.reason)
    code = payload.get("error_code")
    hint = ""
    if e.code == 401 and settings.user_info is None:
        hint = f"the registry asks for credentials and none were given: set {settings.credentials_setting}"
    elif e.code == 401:
        hint = f"the registry refused the credentials of {settings.credentials_setting}: check them"
    elif e.code == 403:
        hint = f"the credentials of {settings.credentials_setting} may not do this"
    return SchemaRegistryError(
        f"{method} {url} answered {e.code}: {message}" + (f" ({hint})" if hint else ""), status=e.code,
        error_code=int(code) if isinstance(code, int) else None, subject=subject)
