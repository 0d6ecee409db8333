"""Read the Java client's ``sasl.jaas.config`` so Java-style configurations work unchanged.

The value is one JAAS login-module entry, as the Java client accepts it::

    org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a\\"b";

Grammar (what Java's ``StreamTokenizer``-based JaasConfig accepts, minus exotic corners): a login module class name,
a control flag (required | requisite | sufficient | optional), then ``key=value`` options where a value is a
double- or single-quoted string (backslash escapes) or a bare word, then ``;``. ``//`` and ``/* */`` comments are
skipped. The Java client requires exactly one login module in this property, and so do we.

The text holds a password, so no error message quotes it, not even a fragment: errors name the key
``sasl.jaas.config`` and a character position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, NamedTuple

from spark_kafka_sink.errors import ConfigError

__all__ = ["JaasLoginModule", "JaasCredentials", "parse_jaas_config", "jaas_credentials", "jaas_oauthbearer_options",
           "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "OAUTHBEARER_LOGIN_MODULE", "KRB5_LOGIN_MODULE"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"  # Kerberos (GSSAPI): the JDK's own
_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_KEY = "sasl.jaas.config"
# Characters of a bare word: Java's default word characters plus the ones Kafka's JaasConfig adds ('-', '_', '$')
# and '.', which class names need.
_WORD_EXTRA = "-_$."
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
# Options whose values must never be shown (repr, errors).
_SECRET_OPTIONS = frozenset({"password", "token", "secret", "keytab"})


@dataclass(frozen=True)
class JaasLoginModule:
    """One parsed login module. ``options`` is read-only; its ``repr`` hides secret values."""

    class_name: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = {k: ("***" if any(s in k.lower() for s in _SECRET_OPTIONS) else v) for k, v in self.options.items()}
        return f"JaasLoginModule({self.class_name!r}, {self.control_flag!r}, options={shown!r})"

    __str__ = __repr__


def _error(message: str) -> ConfigError:
    return ConfigError(f"{_KEY}: {message}", key=_KEY)


class _Tokens:
    """A tiny tokenizer: words, quoted strings, and the punctuation ``=`` and ``;``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_space_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos].isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise _error(f"unterminated /* comment starting at character {self.pos + 1}")
                self.pos = end + 2
            else:
                return

    def next(self) -> tuple[str, str, int] | None:
        """(kind, value, start): kind is "word", "quoted" or the punctuation itself; None at the end."""
        self._skip_space_and_comments()
        if self.pos >= len(self.text):
            return None
        start = self.pos
        c = self.text[start]
        if c in "=;":
            self.pos += 1
            return c, c, start
        if c in "\"'":
            return "quoted", self._quoted(c), start
        if c.isalnum() or c in _WORD_EXTRA:
            end = start
            while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in _WORD_EXTRA):
                end += 1
            self.pos = end
            return "word", self.text[start:end], start
        raise _error(f"unexpected character at position {start + 1}")

    def _quoted(self, quote: str) -> str:
        text = self.text
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while self.pos < len(text):
            c = text[self.pos]
            if c == quote:
                self.pos += 1
                return "".join(out)
            if c == "\\" and self.pos + 1 < len(text):
                self.pos += 1
                e = text[self.pos]
                if e in "01234567":
                    # Up to three octal digits, as Java's StreamTokenizer reads them.
                    digits = e
                    while len(digits) < 3 and self.pos + 1 < len(text) and text[self.pos + 1] in "01234567":
                        self.pos += 1
                        digits += text[self.pos]
                    out.append(chr(int(digits, 8)))
                else:
                    out.append(_ESCAPES.get(e, e))
            else:
                out.append(c)
            self.pos += 1
        raise _error(f"unterminated quoted value starting at character {start + 1}")


def parse_jaas_config(text: str) -> JaasLoginModule:
    """Parse ``sasl.jaas.config`` into its single login module; :class:`ConfigError` (key ``sasl.jaas.config``)
    on any syntax problem, without quoting the text."""
    tokens = _Tokens(text)
    modules: list[JaasLoginModule] = []
    while True:
        tok = tokens.next()
        if tok is None:
            break
        kind, class_name, start = tok
        if kind != "word":
            raise _error(f"expected a login module class name at character {start + 1}")
        flag_tok = tokens.next()
        if flag_tok is None or flag_tok[0] != "word" or flag_tok[1].lower() not in _CONTROL_FLAGS:
            raise _error(f"the login module must be followed by a control flag ({' | '.join(_CONTROL_FLAGS)})")
        options: dict[str, str] = {}
        while True:
            tok = tokens.next()
            if tok is None:
                raise _error("the login module entry must end with ';'")
            kind, key, start = tok
            if kind == ";":
                break
            # Positions only, never the token: with an unquoted value containing spaces, a stray "option name"
            # may be a piece of the password.
            if kind != "word":
                raise _error(f"expected an option name at character {start + 1}")
            eq = tokens.next()
            if eq is None or eq[0] != "=":
                raise _error(f"the option at character {start + 1} must be followed by '=' and a value "
                             "(quote values that contain spaces)")
            value_tok = tokens.next()
            if value_tok is None or value_tok[0] not in ("word", "quoted"):
                raise _error(f"the option at character {start + 1} has no value")
            if key in options:
                raise _error(f"the option at character {start + 1} is given twice")
            options[key] = value_tok[1]
        modules.append(JaasLoginModule(class_name, flag_tok[1].lower(), MappingProxyType(options)))
    if len(modules) != 1:
        raise _error(f"expected exactly one login module entry, found {len(modules)}")
    return modules[0]


class JaasCredentials(NamedTuple):
    """What a PLAIN or SCRAM login module gives. ``token_auth``: ScramLoginModule's ``tokenauth=true``, a delegation
    token's id and HMAC as user name and password (the SCRAM exchange then carries the ``tokenauth`` extension)."""

    username: str
    password: str
    token_auth: bool = False


def jaas_credentials(text: str, mechanism: str) -> JaasCredentials:
    """The credentials in ``sasl.jaas.config`` for ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).

    The login module must fit the mechanism (PlainLoginModule for PLAIN, ScramLoginModule for SCRAM), as the Java
    client requires; both ``username`` and ``password`` must be present. ``tokenauth`` counts for SCRAM only, as in
    Java (``true`` in any case; any other value is false), and PlainLoginModule ignores it.
    """
    module = parse_jaas_config(text)
    scram = mechanism.upper() != "PLAIN"
    expected = SCRAM_LOGIN_MODULE if scram else PLAIN_LOGIN_MODULE
    if module.class_name != expected:
        # Name the module only when it looks like one: a malformed value could put a secret in that spot.
        named = module.class_name if module.class_name.endswith("LoginModule") else "another login module"
        raise _error(f"sasl.mechanism={mechanism} needs the login module {expected}, but the config names {named}")
    missing = [name for name in ("username", "password") if name not in module.options]
    if missing:
        raise _error(f"the login module has no {' or '.join(missing)} option: add "
                     f"{' '.join(f'{name}=...' for name in missing)} before the ';'")
    token_auth = scram and module.options.get("tokenauth", "").lower() == "true"
    return JaasCredentials(module.options["username"], module.options["password"], token_auth)


def jaas_oauthbearer_options(text: str) -> dict[str, str]:
    """The options of ``sasl.jaas.config`` for OAUTHBEARER, whose login module must be OAuthBearerLoginModule."""
    module = parse_jaas_config(text)
    if module.class_name != OAUTHBEARER_LOGIN_MODULE:
        named = module.class_name if module.class_name.endswith("LoginModule") else "another login module"
        raise _error(f"sasl.mechanism=OAUTHBEARER needs the login module {OAUTHBEARER_LOGIN_MODULE}, but the config "
                     f"names {named}")
    return dict(module.options)
