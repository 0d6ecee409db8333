"""Kerberos for SASL/GSSAPI: the client's credentials and one GSS-API security context per connection, through
MIT Kerberos's GSS-API library and the optional ``gssapi`` package (``pip install 'spark-kafka-sink[gssapi]'``).

Where the credentials come from, as the Java client's ``Krb5LoginModule`` options in ``sasl.jaas.config`` say::

    com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true
        keyTab="/etc/security/keytabs/etl.keytab" principal="etl@EXAMPLE.COM";
    com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;      # what `kinit` left

or librdkafka's ``sasl.kerberos.keytab`` + ``sasl.kerberos.principal``, or neither (MIT's defaults: the ticket
cache of ``KRB5CCNAME`` and the client keytab of ``KRB5_CLIENT_KTNAME``). A keytab login keeps its tickets in a
memory cache of this process, never in the user's ticket cache, and MIT Kerberos gets new ones from the keytab
when they run out (Java's login thread does the same). A ticket cache is used as it is: whoever ran ``kinit``
renews it. With both (``useTicketCache`` and ``useKeyTab``), the cache first and the keytab when the cache has no
valid ticket, as Java.

The broker is ``<sasl.kerberos.service.name>/<host>`` (a host-based service name): the host the connection was
made to, and for an IP address the name it resolves back to, as Java's ``InetAddress.getHostName()``
(:mod:`.host_names`; ``client.dns.lookup=resolve_canonical_bootstrap_servers_only`` for aliases); the realm
and any further canonicalisation are krb5.conf's (``KRB5_CONFIG``; Java's ``java.security.krb5.conf``). Mutual
authentication is asked for, so a broker without the service key fails the exchange.

Getting credentials and a service ticket talks to the KDC: :class:`~spark_kafka_sink.net.security.SaslAuthentication`
runs :meth:`KerberosLogin.context` and the first step in a thread of their own (Java's client does it in its network
thread), so a slow KDC holds up only the connection that waits for it; the KDC timeouts are MIT's. Failures raise
:class:`~spark_kafka_sink.protocol.sasl.SaslVerificationError` (fatal) with MIT's message and what to check.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.config import require_readable_file
from spark_kafka_sink.net.host_names import name_of_address
from spark_kafka_sink.protocol.jaas import KRB5_LOGIN_MODULE, parse_jaas_config
from spark_kafka_sink.protocol.sasl import GssContext, SaslVerificationError

__all__ = ["KerberosLogin", "kerberos_login", "require_gssapi"]

_INSTALL = ("pip install 'spark-kafka-sink[gssapi]' (it builds against MIT Kerberos: apt-get install libkrb5-dev, "
            "or dnf install krb5-devel)")
# Krb5LoginModule options that change nothing here: the key is never stored in a Subject, nothing prompts, and
# MIT Kerberos reads krb5.conf and renews keytab tickets by itself.
_NO_EFFECT = frozenset({"storeKey", "doNotPrompt", "debug", "refreshKrb5Config", "renewTGT", "isInitiator",
                        "clearPass", "tryFirstPass", "useFirstPass", "storePass", "serviceName"})
_KNOWN = _NO_EFFECT | {"useKeyTab", "keyTab", "principal", "useTicketCache", "ticketCache"}


def require_gssapi() -> ModuleType:
    """The ``gssapi`` package, or a ConfigError saying how to install it."""
    try:
        import gssapi
    except ImportError:
        raise ConfigError(f"sasl.mechanism=GSSAPI (Kerberos) needs the gssapi package: {_INSTALL}",
                          key="sasl.mechanism") from None
    module: ModuleType = gssapi
    return module


@dataclass(frozen=True)
class KerberosLogin:
    """Where this client's Kerberos credentials come from, and the broker's service name."""

    service_name: str
    principal: str | None = None
    keytab: str | None = None
    use_ticket_cache: bool = False
    ticket_cache: str | None = None
    # The memory ticket cache of a keytab login: one per login (configuration) in this process.
    _memory_cache: str = field(default_factory=lambda: f"MEMORY:spark-kafka-sink-{uuid.uuid4().hex}",
                               compare=False, repr=False)

    @property
    def source(self) -> str:
        """For messages: who logs in, and from what."""
        who = self.principal or "the default principal"
        if self.keytab and self.use_ticket_cache:
            return f"{who} (ticket cache, then keytab {self.keytab})"
        if self.keytab:
            return f"{who} (keytab {self.keytab})"
        if self.use_ticket_cache:
            return f"{who} (ticket cache{' ' + self.ticket_cache if self.ticket_cache else ''})"
        return f"{who} (MIT Kerberos's default credentials)"

    def context(self, host: str) -> tuple[GssContext, str]:
        """A new initiating context for the broker at ``host``, and this client's principal (the SASL
        authorization identity). Acquiring credentials may talk to the KDC."""
        gssapi = require_gssapi()
        target = f"{self.service_name}@{name_of_address(host)}"
        try:
            credentials = self._credentials(gssapi)
            principal = str(credentials.name)
            flags = [gssapi.RequirementFlag.mutual_authentication, gssapi.RequirementFlag.integrity]
            name = gssapi.Name(target, gssapi.NameType.hostbased_service)
            return _Context(gssapi.SecurityContext(name=name, creds=credentials, usage="initiate", flags=flags),
                            gssapi, self, target), principal
        except gssapi.exceptions.GSSError as exc:
            raise _failure(exc, self, target) from None

    def _credentials(self, gssapi: ModuleType) -> Any:
        name = gssapi.Name(self.principal, gssapi.NameType.kerberos_principal) if self.principal else None
        if self.use_ticket_cache:
            store = {"ccache": self.ticket_cache} if self.ticket_cache else None
            try:
                credentials = gssapi.Credentials(name=name, usage="initiate", store=store)
                if credentials.lifetime > 0:
                    return credentials
            except gssapi.exceptions.GSSError:
                if not self.keytab:
                    raise
        if self.keytab:
            return gssapi.Credentials(name=name, usage="initiate",
                                      store={"client_keytab": self.keytab, "ccache": self._memory_cache})
        return gssapi.Credentials(name=name, usage="initiate")


class _Context:
    """A gssapi.SecurityContext as the SASL mechanism's :class:`GssContext`, its errors made SASL failures."""

    def __init__(self, context: Any, gssapi: ModuleType, login: KerberosLogin, target: str) -> None:
        self._context = context
        self._gssapi = gssapi
        self._login = login
        self._target = target

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    @contextlib.contextmanager
    def _as_sasl_failure(self) -> Iterator[None]:
        try:
            yield
        except self._gssapi.exceptions.GSSError as exc:
            raise _failure(exc, self._login, self._target) from None

    def step(self, token: bytes | None) -> bytes | None:
        with self._as_sasl_failure():
            out = self._context.step(token)
        return None if out is None else bytes(out)

    def wrap(self, message: bytes) -> bytes:
        with self._as_sasl_failure():
            return bytes(self._context.wrap(message, False).message)

    def unwrap(self, message: bytes) -> bytes:
        with self._as_sasl_failure():
            return bytes(self._context.unwrap(message).message)


def _gss_message(exc: Any) -> str:
    """MIT's own words: the mechanism's (minor) status, which says what happened, else the GSS-API (major) one."""
    try:
        for code, major in ((exc.min_code, False), (exc.maj_code, True)):
            texts = [t for t in exc.get_all_statuses(code, major) if t and t != "Success"] if code else []
            if texts:
                return "; ".join(texts)
    except Exception:  # an older gssapi without these: its str() has both, less readably
        pass
    return " ".join(str(exc).split())


def _failure(exc: Exception, login: KerberosLogin, target: str) -> SaslVerificationError:
    text = _gss_message(exc)
    lowered = text.lower()
    service, _, host = target.partition("@")
    if "not found in kerberos database" in lowered:
        hint = (f"the KDC does not know the broker's principal {service}/{host} or the realm krb5.conf maps {host} "
                "to: check sasl.kerberos.service.name, that bootstrap.servers names the brokers by the host names in "
                "their principals (an alias: client.dns.lookup=resolve_canonical_bootstrap_servers_only), and "
                "krb5.conf's [domain_realm]")
    elif "cannot contact any kdc" in lowered or "cannot find kdc" in lowered:
        hint = "no KDC answered: check the realm's kdc entries in krb5.conf (KRB5_CONFIG)"
    elif login.keytab and any(word in lowered for word in ("credentials", "keytab", "key table", "preauthentication",
                                                             "expired")):
        hint = (f"the keytab {login.keytab} holds no valid key of {login.principal}: check principal and keyTab "
                "(klist -k lists what a keytab holds)")
    elif "no credentials cache" in lowered or "no kerberos credentials" in lowered or "expired" in lowered:
        hint = (f"no valid Kerberos credentials for {login.source}: run kinit, or set sasl.jaas.config to "
                f"{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab=\"...\" principal=\"...\";")
    else:
        hint = f"logging in as {login.source} to reach {service}/{host}"
    return SaslVerificationError(f"Kerberos: {text} ({hint})")


def kerberos_login(jaas: str | None, service_name: str | None, keytab: str | None = None,
                   principal: str | None = None) -> KerberosLogin:
    """Validate the GSSAPI settings: ``sasl.jaas.config`` (``jaas``, revealed), ``sasl.kerberos.service.name``,
    and librdkafka's ``sasl.kerberos.keytab`` / ``sasl.kerberos.principal``. ConfigError names the key; then the
    gssapi package must be importable."""
    module = None if jaas is None else parse_jaas_config(jaas)
    options = dict(module.options) if module is not None else {}
    if module is not None and module.class_name != KRB5_LOGIN_MODULE:
        named = module.class_name if module.class_name.endswith("LoginModule") else "another login module"
        raise ConfigError(f"sasl.jaas.config: sasl.mechanism=GSSAPI needs the login module {KRB5_LOGIN_MODULE}, but "
                          f"the config names {named}", key="sasl.jaas.config")
    unknown = sorted(set(options) - _KNOWN)
    if unknown:
        raise ConfigError(f"sasl.jaas.config: {KRB5_LOGIN_MODULE} has no option {', '.join(unknown)} this client "
                          "knows (it takes useKeyTab, keyTab, principal, useTicketCache, ticketCache)",
                          key="sasl.jaas.config")
    # Java: sasl.kerberos.service.name, or the JAAS entry's serviceName; both must agree.
    jaas_service = options.get("serviceName") or None
    if service_name and jaas_service and service_name != jaas_service:
        raise ConfigError(f"sasl.kerberos.service.name={service_name!r} and sasl.jaas.config's "
                          f"serviceName={jaas_service!r} differ: set one", key="sasl.kerberos.service.name")
    service = service_name or jaas_service
    if not service:
        raise ConfigError("sasl.mechanism=GSSAPI needs the broker's Kerberos service name: set "
                          "sasl.kerberos.service.name (usually kafka, the first part of the broker's principal "
                          "kafka/host@REALM)", key="sasl.kerberos.service.name")
    if jaas is not None and (keytab or principal):
        raise ConfigError("set either sasl.jaas.config or sasl.kerberos.keytab / sasl.kerberos.principal, not both",
                          key="sasl.jaas.config")
    use_keytab = _flag(options, "useKeyTab")
    use_cache = _flag(options, "useTicketCache")
    if jaas is not None:
        keytab = options.get("keyTab") or None
        principal = options.get("principal") or None
        if not use_keytab and keytab:
            raise ConfigError("sasl.jaas.config: keyTab is set without useKeyTab=true", key="sasl.jaas.config")
        if use_keytab and not keytab:
            raise ConfigError("sasl.jaas.config: useKeyTab=true needs keyTab=\"/path/to/file.keytab\"",
                              key="sasl.jaas.config")
        if not use_keytab and not use_cache:
            raise ConfigError(f"sasl.jaas.config: {KRB5_LOGIN_MODULE} without useKeyTab=true or useTicketCache=true "
                              "would ask for a password, which a job cannot type: add useKeyTab=true "
                              "keyTab=\"...\" principal=\"...\" (or useTicketCache=true after kinit)",
                              key="sasl.jaas.config")
    key = "sasl.jaas.config" if jaas is not None else "sasl.kerberos.keytab"
    if keytab:
        if not principal:
            raise ConfigError(f"{key}: a keytab login needs the principal to log in as (principal=\"name@REALM\")",
                              key=key)
        require_readable_file(keytab, key)
    require_gssapi()
    return KerberosLogin(service_name=service, principal=principal, keytab=keytab, use_ticket_cache=use_cache,
                         ticket_cache=options.get("ticketCache") or None)


def _flag(options: Mapping[str, str], name: str) -> bool:
    value = options.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"sasl.jaas.config: {name} must be true or false, got {value!r}", key="sasl.jaas.config")
    return value == "true"
