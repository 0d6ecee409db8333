"""Host names as the Java client derives them from addresses, for Kerberos: the broker's service principal names
a host, and Kerberos-secured clusters are often reached through addresses or DNS aliases.

* :func:`name_of_address`: an IP address's name by a reverse lookup (the address itself when there is none), as
  Java's ``InetAddress.getHostName()`` / ``getCanonicalHostName()``; a name stays as it is.
* :func:`canonical_bootstrap_servers`: ``client.dns.lookup=resolve_canonical_bootstrap_servers_only``: each
  bootstrap host resolved to its addresses and each address to its canonical name, once, when the client is made
  (Java's ``ClientUtils.parseAndValidateAddresses``). An alias such as ``kafka.example.com`` then reaches the
  brokers by the names in their principals.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Sequence

from spark_kafka_sink.errors import ConfigError

__all__ = ["name_of_address", "canonical_bootstrap_servers"]

log = logging.getLogger(__name__)


def name_of_address(host: str) -> str:
    """``host`` as given when it is a name; for an IP address the name it resolves back to, else the address."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    try:
        return socket.gethostbyaddr(host)[0]
    except OSError:
        return host


def canonical_bootstrap_servers(servers: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """Every address of every bootstrap host, by its canonical name, in order and without repeats; a host that
    does not resolve is left out (logged), and none resolving is a ConfigError."""
    out: dict[tuple[str, int], None] = {}
    for host, port in servers:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            log.warning("bootstrap.servers: %s does not resolve (%s); left out", host, exc.strerror)
            continue
        for address in dict.fromkeys(str(info[4][0]) for info in infos):
            out[(name_of_address(address), port)] = None
    if not out:
        raise ConfigError("client.dns.lookup=resolve_canonical_bootstrap_servers_only: no host of bootstrap.servers "
                          "resolves", key="bootstrap.servers")
    return tuple(out)
