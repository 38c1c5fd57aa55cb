"""Configuration of the share consumer: parsing, coercion and validation.

``parse_config`` turns Kafka's dotted keys (``{"bootstrap.servers": ...}``)
and/or Python keyword names (``bootstrap_servers=...``; an underscore stands
for a dot) into a frozen, fully typed :class:`ShareConsumerConfig`.

Rules, following the Java client's ``ShareConsumerConfig`` (Kafka 4.1+):

* Values are coerced the way Java's ``ConfigDef`` does: integer keys take an
  ``int`` or a decimal string (``"500"``); boolean keys take a ``bool`` or
  ``"true"``/``"false"`` in any case; strings are stripped. A ``bool`` is not
  an integer and a ``float`` is never silently truncated.
* The consumer-group keys a share group has no use for (``auto.offset.reset``,
  ``isolation.level``, ...) are rejected even when set to their defaults, with
  the group or broker config that replaces each one.
* Unknown keys are errors (Java ignores them; a typo then silently does
  nothing), with the closest known key suggested.
* A value of ``None`` means "use the default" for every supported key.
* Every problem found is reported in one :class:`~kafka_share.errors.ConfigError`.
  Cross-field checks run once every single key is valid.
* Secrets (``sasl.password``, ``sasl.jaas.config``, ``ssl.key.password``)
  never appear in error messages, ``repr`` or :meth:`ShareConsumerConfig.to_properties`.

Where Java only warns, so do we (``logging``), and the value Java would
effectively use is stored:

* ``retry.backoff.ms`` greater than ``retry.backoff.max.ms``: Java applies a
  static backoff of ``retry.backoff.max.ms``
  (``CommonClientConfigs.warnDisablingExponentialBackoff``), so
  ``retry_backoff_ms`` is lowered to ``retry_backoff_max_ms``. The same holds
  for ``socket.connection.setup.timeout.ms`` and its ``.max.ms``.
* ``reconnect.backoff.ms`` given without ``reconnect.backoff.max.ms``: Java
  disables exponential reconnect backoff
  (``CommonClientConfigs.postProcessReconnectBackoffConfigs``), so
  ``reconnect_backoff_max_ms`` becomes ``reconnect_backoff_ms``.
"""

from __future__ import annotations

import enum
import logging
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import ConfigError

__all__ = [
    "IMPLEMENTED_SECURITY_PROTOCOLS",
    "REJECTED_KEYS",
    "AcknowledgementMode",
    "AcquireMode",
    "Deserializer",
    "SaslMechanism",
    "SecurityProtocol",
    "ShareConsumerConfig",
    "parse_admin_config",
    "parse_config",
]

_log = logging.getLogger(__name__)

#: A key or value deserializer: raw bytes from the record -> the object handed to the app.
Deserializer = Callable[[bytes], object]

_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1
_HIDDEN: Final = "[hidden]"  # what Java's Password.toString() prints


class AcknowledgementMode(enum.StrEnum):
    """``share.acknowledgement.mode``: how delivered records get acknowledged."""

    #: Every record of a poll is accepted by the next poll, commit_sync or commit_async.
    IMPLICIT = "implicit"
    #: The application acknowledges every record before the next poll.
    EXPLICIT = "explicit"


class AcquireMode(enum.IntEnum):
    """``share.acquire.mode`` (KIP-1206). The values are the ShareFetch v2 wire bytes."""

    #: The broker may hand out whole producer batches, so a poll can exceed max.poll.records.
    BATCH_OPTIMIZED = 0
    #: The broker acquires at most max.poll.records records (needs ShareFetch v2, Kafka 4.2+).
    RECORD_LIMIT = 1

    def __str__(self) -> str:
        return self.name.lower()


class SecurityProtocol(enum.StrEnum):
    """``security.protocol``: transport and authentication of broker connections."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_ssl(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(enum.StrEnum):
    """``sasl.mechanism``: the SASL mechanisms this client can speak."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"
    GSSAPI = "GSSAPI"

    @property
    def uses_password(self) -> bool:
        return self in (
            SaslMechanism.PLAIN, SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512
        )


#: Security protocols the network layer implements (all four).
IMPLEMENTED_SECURITY_PROTOCOLS: Final[frozenset[SecurityProtocol]] = frozenset(SecurityProtocol)

_GROUP_CONFIG_HOW = (
    "on the group: kafka-share groups config GROUP --set KEY=VALUE, or "
    "Admin.alter_group_configs(GROUP, {KEY: VALUE}) (IncrementalAlterConfigs on the "
    "GROUP resource)"
)

#: Share-group configs (set on the group, not on a consumer); a consumer given
#: one is told so instead of being offered a look-alike consumer key.
SHARE_GROUP_CONFIGS: Final[frozenset[str]] = frozenset({
    "share.auto.offset.reset",
    "share.isolation.level",
    "share.record.lock.duration.ms",
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.delivery.count.limit",
    "share.partition.max.record.locks",
})

#: Keys Java's ShareConsumerConfig (4.1+) refuses even when set to their
#: default value, each with what to do instead.
REJECTED_KEYS: Final[Mapping[str, str]] = {
    "auto.offset.reset": (
        "set the group config share.auto.offset.reset "
        f"(earliest|latest|by_duration:<ISO-8601 duration>) {_GROUP_CONFIG_HOW}"
    ),
    "enable.auto.commit": (
        "share groups commit no offsets: records are acknowledged instead "
        "(see share.acknowledgement.mode); remove it"
    ),
    "group.instance.id": "share groups have no static membership; remove it",
    "isolation.level": (
        "set the group config share.isolation.level (read_committed|read_uncommitted) "
        f"{_GROUP_CONFIG_HOW}"
    ),
    "partition.assignment.strategy": (
        "share groups are assigned by the broker's share assignor; remove it"
    ),
    "interceptor.classes": "share consumers do not support interceptors; remove it",
    "session.timeout.ms": (
        f"set the group config share.session.timeout.ms {_GROUP_CONFIG_HOW} "
        "or the broker config group.share.session.timeout.ms"
    ),
    "heartbeat.interval.ms": (
        f"set the group config share.heartbeat.interval.ms {_GROUP_CONFIG_HOW} "
        "or the broker config group.share.heartbeat.interval.ms; "
        "the broker sends the interval in every heartbeat response"
    ),
    "group.protocol": "a share consumer always uses the share group protocol; remove it",
    "group.remote.assignor": (
        "share groups use the broker's share assignor (broker config); remove it"
    ),
}

_JAVA_KEYSTORE_HINT = (
    "Java key stores are not supported: give PEM files with ssl.cafile, ssl.certfile, "
    "ssl.keyfile and ssl.key.password"
)
_KEYTOOL_HINT = (
    "JKS key stores cannot be read by Python; convert to PKCS12, e.g. "
    "'keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 "
    "-deststoretype PKCS12', and set ssl.keystore.type=PKCS12 (or ssl.truststore.type) "
    "with the .p12 file, or to PEM with 'openssl pkcs12 -in store.p12 -out store.pem "
    "-nodes' and type PEM"
)

#: Unknown keys people are likely to carry over from Java configs, with a
#: better hint than a spelling suggestion.
_UNKNOWN_KEY_HINTS: Final[Mapping[str, str]] = {
    "ssl.truststore.password": (
        "PEM trust stores have no password; give ssl.truststore.type=PEM with "
        "ssl.truststore.location (or ssl.cafile). " + _KEYTOOL_HINT
    ),
    "ssl.keystore.password": (
        "PEM key stores use ssl.key.password for an encrypted key. " + _KEYTOOL_HINT
    ),
    **dict.fromkeys(
        (
            "sasl.login.callback.handler.class",
            "sasl.client.callback.handler.class",
            "sasl.login.class",
            "ssl.engine.factory.class",
            "ssl.provider",
            "ssl.keymanager.algorithm",
            "ssl.trustmanager.algorithm",
            "security.providers",
        ),
        "Java classes cannot be loaded by a Python client; for OAUTHBEARER pass "
        "sasl_oauth_token_provider= (a callable) or sasl.oauthbearer.token.endpoint.url; "
        "for TLS pass ssl_context= (an ssl.SSLContext)",
    ),
    "auto.commit.interval.ms": "share groups commit no offsets; remove it",
    "exclude.internal.topics": "it has no effect on a share consumer; remove it",
    "metric.reporters": "metrics reporter classes are not supported; remove it",
    **dict.fromkeys(
        (
            "acks",
            "batch.size",
            "compression.type",
            "enable.idempotence",
            "key.serializer",
            "linger.ms",
            "transactional.id",
            "value.serializer",
        ),
        "it is a producer config; a share consumer does not use it",
    ),
}


class _InvalidValueError(Exception):
    """Raised by a value parser; the message says what the value must be."""


# --------------------------------------------------------------------------
# Value parsers. Each takes the raw value (never None) and returns the typed
# value or raises _InvalidValueError. They are idempotent (a typed value parses to
# itself), so ShareConsumerConfig can run them again on direct construction.
# --------------------------------------------------------------------------


def _type_name(value: object) -> str:
    return type(value).__name__


def _int_parser(minimum: int, maximum: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool):
            # bool is an int subclass in Python; True for "500" is always a mistake.
            raise _InvalidValueError(
                f"expected an integer, got a boolean; allowed range [{minimum}, {maximum}]"
            )
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value, re.ASCII):
            number = int(value)
        elif isinstance(value, float):
            raise _InvalidValueError(
                f"expected an integer, got a float; allowed range [{minimum}, {maximum}]"
            )
        else:
            raise _InvalidValueError(
                f"expected an integer or a decimal string, got {_type_name(value)}; "
                f"allowed range [{minimum}, {maximum}]"
            )
        if not minimum <= number <= maximum:
            raise _InvalidValueError(f"the value must be in the range [{minimum}, {maximum}]")
        return number

    return parse


def _float_parser(minimum: float, maximum: float) -> Callable[[object], float]:
    def parse(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise _InvalidValueError(
                f"expected a number, got {_type_name(value)}; allowed range [{minimum}, {maximum}]"
            )
        try:
            number = float(value)
        except ValueError:
            raise _InvalidValueError(
                f"expected a number, got {value!r}; allowed range [{minimum}, {maximum}]"
            ) from None
        if not minimum <= number <= maximum:  # NaN fails this too
            raise _InvalidValueError(f"the value must be in the range [{minimum}, {maximum}]")
        return number

    return parse


def _parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    raise _InvalidValueError("expected a boolean: True/False or the string 'true'/'false'")


def _parse_ssl_context(value: object) -> object:
    # An SSLContext exists only once ssl is imported: asking sys.modules keeps a
    # client that uses no TLS from importing ssl (about 10 ms and 1 MB).
    ssl = sys.modules.get("ssl")
    if ssl is not None and isinstance(value, ssl.SSLContext):
        return value
    raise _InvalidValueError(f"expected an ssl.SSLContext, got {_type_name(value)}")


def _parse_token_provider(value: object) -> object:
    if callable(value) or callable(getattr(value, "token", None)):
        return value
    raise _InvalidValueError(
        f"expected a callable or an object with a token() method, got {_type_name(value)}"
    )


def _parse_tls_versions(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _InvalidValueError(f"expected a string, got {_type_name(value)}")
    names = [part.strip() for part in value.split(",") if part.strip()]
    bad = [n for n in names if n not in ("TLSv1.2", "TLSv1.3")]
    if bad or not names:
        raise _InvalidValueError(
            "the value must list TLSv1.2 and/or TLSv1.3 (older versions are insecure)"
        )
    return ",".join(sorted(set(names)))


def _parse_str(value: object) -> str:
    if not isinstance(value, str):
        raise _InvalidValueError(f"expected a string, got {_type_name(value)}")
    return value.strip()


def _keytab_problems(keytab: str | None, principal: str | None) -> list[str]:
    if keytab is None:
        return []
    if principal is None:
        return ["sasl.kerberos.keytab needs sasl.kerberos.principal: the keytab's principal "
                "to log in as (e.g. client@EXAMPLE.COM)"]
    try:
        with open(keytab, "rb"):
            pass
    except OSError as exc:
        return [f"sasl.kerberos.keytab {keytab!r} cannot be read: {exc.strerror or exc}"]
    return []


def _parse_optional_str(value: object) -> str | None:
    """A string where empty means "not set" (Java's default "" for these keys)."""
    return _parse_str(value) or None


def _parse_group_id(value: object) -> str:
    group_id = _parse_str(value)
    if not group_id:
        raise _InvalidValueError(_GROUP_ID_MESSAGE)
    return group_id


_GROUP_ID_MESSAGE: Final = (
    "You must provide a valid group.id in the consumer configuration "
    '(a non-empty string naming the share group, e.g. group_id="my-share-group")'
)


def _parse_ack_mode(value: object) -> AcknowledgementMode:
    # Case-sensitive, as in Java: only the lower-case names are valid.
    if isinstance(value, AcknowledgementMode):
        return value
    if isinstance(value, str):
        for mode in AcknowledgementMode:
            if value.strip() == mode.value:
                return mode
    raise _InvalidValueError("the value must be either 'implicit' or 'explicit'")


def _parse_acquire_mode(value: object) -> AcquireMode:
    # Case-insensitive, as in Java (ShareAcquireMode.valueOf(name.toUpperCase())).
    if isinstance(value, AcquireMode):
        return value
    if isinstance(value, str):
        try:
            return AcquireMode[value.strip().upper()]
        except KeyError:
            pass
    raise _InvalidValueError("the value must be either 'batch_optimized' or 'record_limit'")


def _parse_security_protocol(value: object) -> SecurityProtocol:
    if isinstance(value, SecurityProtocol):
        return value
    if isinstance(value, str):
        try:
            return SecurityProtocol(value.strip().upper())
        except ValueError:
            pass
    raise _InvalidValueError(
        "the value must be one of " + ", ".join(p.value for p in SecurityProtocol)
    )


def _parse_sasl_mechanism(value: object) -> SaslMechanism | None:
    if isinstance(value, SaslMechanism):
        return value
    if isinstance(value, str):
        name = value.strip().upper()
        if not name:
            return None
        try:
            return SaslMechanism(name)
        except ValueError:
            pass
    raise _InvalidValueError(
        "supported mechanisms are " + ", ".join(m.value for m in SaslMechanism)
    )


def _choice_parser(*choices: str) -> Callable[[object], str]:
    """A case-sensitive string choice (Java's ``ConfigDef.ValidString``)."""

    def parse(value: object) -> str:
        if isinstance(value, str) and value.strip() in choices:
            return value.strip()
        raise _InvalidValueError("the value must be one of " + ", ".join(repr(c) for c in choices))

    return parse


def _parse_deserializer(value: object) -> Deserializer:
    if isinstance(value, str):
        raise _InvalidValueError(
            "Java class names are not supported; pass a Python callable taking the raw "
            "bytes, e.g. value_deserializer=lambda b: b.decode('utf-8')"
        )
    if not callable(value):
        raise _InvalidValueError(
            f"expected a callable (bytes -> object) or None, got {_type_name(value)}"
        )
    return value


_HOSTNAME_RE: Final = re.compile(
    r"[A-Za-z0-9_]([A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?)*\.?"
)


def _parse_address(entry: str) -> tuple[str, int]:
    text = entry.strip()
    if text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise _InvalidValueError(f"{text!r} is not host:port (IPv6 form is [::1]:9092)")
        import ipaddress  # noqa: PLC0415  (bracketed IPv6 bootstrap addresses only)

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _InvalidValueError(f"{host!r} in {text!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise _InvalidValueError(f"{text!r} is not host:port (e.g. localhost:9092)")
        if ":" in host:
            raise _InvalidValueError(f"{text!r}: put IPv6 addresses in brackets, e.g. [::1]:9092")
        if not _HOSTNAME_RE.fullmatch(host):
            raise _InvalidValueError(
                f"{host!r} in {text!r} is not a valid host name or IPv4 address"
            )
    if not re.fullmatch(r"[0-9]{1,5}", port_text, re.ASCII) or not 1 <= int(port_text) <= 65535:
        raise _InvalidValueError(f"port {port_text!r} in {text!r} must be a number from 1 to 65535")
    return host, int(port_text)


def _parse_bootstrap(value: object) -> tuple[tuple[str, int], ...]:
    """``"h1:p1,h2:p2"`` or a list of ``"host:port"`` (or ``(host, port)`` pairs)."""
    entries: list[object]
    if isinstance(value, str):
        entries = [part for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        entries = list(value)
    else:
        raise _InvalidValueError(
            f"expected 'host:port,host:port' or a list of 'host:port', got {_type_name(value)}"
        )
    servers: list[tuple[str, int]] = []
    for entry in entries:
        if isinstance(entry, str):
            servers.append(_parse_address(entry))
        elif (
            isinstance(entry, tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], int)
            and not isinstance(entry[1], bool)
        ):
            host, port = entry
            rendered = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            servers.append(_parse_address(rendered))
        else:
            raise _InvalidValueError(f"each server must be a 'host:port' string, got {entry!r}")
    if not servers:
        raise _InvalidValueError("at least one host:port is required, e.g. 'localhost:9092'")
    return tuple(servers)


def _format_bootstrap(servers: Iterable[tuple[str, int]]) -> str:
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in servers)


@attrs_repr
@attrs.frozen(repr=False)
class _Spec:
    """How one config key is read: the metadata of its ShareConsumerConfig field."""

    parse: Callable[[object], object]
    secret: bool = False
    #: Other clients' names for the key (Java, librdkafka/confluent-kafka,
    #: kafka-python), accepted as written in their configs and stored under the key.
    aliases: tuple[str, ...] = ()


#: The metadata entry of a ShareConsumerConfig field holding its _Spec.
_SPEC: Final = "kafka_share.config.spec"


def _key(
    parse: Callable[[object], object],
    default: object,
    *,
    secret: bool = False,
    aliases: tuple[str, ...] = (),
    shown: Callable[[Any], str] | None = None,
) -> Any:
    """Declare a config key with a default: a ShareConsumerConfig field (the key
    with dots replaced by underscores) with its parser, whether its value is a
    secret (``repr`` and errors hide it) and other clients' names for it.
    ``shown`` renders the value in ``repr``."""
    return attrs.field(
        default=default,
        repr=_redact if secret else (shown or True),
        metadata={_SPEC: _Spec(parse, secret, aliases)},
    )


#: ``sasl.jaas.config`` is an input only: it is parsed into sasl_username/sasl_password.
_JAAS_KEY: Final = "sasl.jaas.config"

#: Keys read only to interpret others (store types) or accepted without effect.
_STORE_KINDS: Final = ("truststore", "keystore")
_STORE_KEYS: Final = tuple(
    f"ssl.{kind}.{part}" for kind in _STORE_KINDS for part in ("type", "location", "password")
)
_IGNORED_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    # Java's SSLContext protocol: TLS 1.2/1.3 are negotiated per ssl.enabled.protocols.
    "ssl.protocol": ("TLS", "TLSv1.2", "TLSv1.3"),
    # librdkafka: "oidc" is implied by sasl.oauthbearer.token.endpoint.url.
    "sasl.oauthbearer.method": ("default", "oidc"),
}


def _parse_secret(value: object) -> str:
    # Passwords are not stripped: leading/trailing spaces may be part of them.
    if isinstance(value, str):
        return value
    raise _InvalidValueError(f"expected a string, got {_type_name(value)}")


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _shown(key: str, value: object) -> str:
    return _HIDDEN if key in _SECRET_KEYS else repr(value)


def _invalid_message(key: str, value: object, reason: str) -> str:
    return f"Invalid value {_shown(key, value)} for configuration {key}: {reason}"


# --------------------------------------------------------------------------
# sasl.jaas.config
# --------------------------------------------------------------------------

_JAAS_MODULES: Final[Mapping[str, tuple[SaslMechanism, ...]]] = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": (SaslMechanism.PLAIN,),
    "org.apache.kafka.common.security.scram.ScramLoginModule": (
        SaslMechanism.SCRAM_SHA_256,
        SaslMechanism.SCRAM_SHA_512,
    ),
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": (
        SaslMechanism.OAUTHBEARER,
    ),
}
_OAUTH_MODULE: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: OAuthBearerLoginModule options (the older KIP-768 style) -> our keys.
_JAAS_OAUTH_OPTIONS: Final[Mapping[str, str]] = {
    "clientId": "sasl.oauthbearer.client.credentials.client.id",
    "clientSecret": "sasl.oauthbearer.client.credentials.client.secret",
    "scope": "sasl.oauthbearer.scope",
}
_JAAS_ENTRY_RE: Final = re.compile(
    r"\s*(?P<module>[A-Za-z_$][\w$.]*)\s+(?P<flag>required|requisite|sufficient|optional)(?P<rest>.*)",
    re.DOTALL,
)
_JAAS_OPTION_RE: Final = re.compile(
    r'\s*(?P<name>[A-Za-z_][\w.\-]*)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";=]+))',
    re.DOTALL,
)


@attrs_repr
@attrs.frozen(repr=False)
class _JaasLogin:
    module: str
    username: str | None
    password: str | None
    #: OAuthBearerLoginModule options, under our keys.
    oauth: Mapping[str, str] = attrs.field(factory=dict)


def _parse_jaas(value: object) -> _JaasLogin:
    """Parse ``<LoginModule> required username="..." password="...";``.

    Only PlainLoginModule and ScramLoginModule are understood. Error messages
    never quote the text, since it holds a password.
    """
    if not isinstance(value, str):
        raise _InvalidValueError(f"expected a string, got {_type_name(value)}")
    match = _JAAS_ENTRY_RE.fullmatch(value)
    if match is None:
        raise _InvalidValueError(
            'expected \'<LoginModule class> required username="..." password="...";\''
        )
    module, rest = match["module"], match["rest"]
    if module not in _JAAS_MODULES:
        raise _InvalidValueError(
            f"login module {module} is not supported; use PlainLoginModule, "
            "ScramLoginModule or OAuthBearerLoginModule, or give sasl.username and "
            "sasl.password"
        )
    options: dict[str, str] = {}
    pos = 0
    while True:
        option = _JAAS_OPTION_RE.match(rest, pos)
        if option is None:
            break
        quoted = option["quoted"]
        text = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option["bare"]
        options[option["name"]] = text
        pos = option.end()
    if rest[pos:].strip() != ";":
        raise _InvalidValueError(
            "expected exactly one login module entry of the form "
            '\'<LoginModule class> required username="..." password="...";\' ending with ";"'
        )
    if module == _OAUTH_MODULE:
        extra = sorted(set(options) - set(_JAAS_OAUTH_OPTIONS))
        if extra:
            raise _InvalidValueError(
                f"unsupported OAuthBearerLoginModule option(s): {', '.join(extra)} "
                "(supported: clientId, clientSecret, scope; pass a token callable as "
                "sasl_oauth_token_provider= instead of unsecured login options)"
            )
        return _JaasLogin(
            module, None, None, {_JAAS_OAUTH_OPTIONS[k]: v for k, v in options.items()}
        )
    extra = sorted(set(options) - {"username", "password"})
    if extra:
        raise _InvalidValueError(f"unsupported login module option(s): {', '.join(extra)}")
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise _InvalidValueError(f"missing option(s): {', '.join(missing)}")
    return _JaasLogin(module, options["username"], options["password"])


# --------------------------------------------------------------------------
# The config class
# --------------------------------------------------------------------------


def _object_repr(value: object, what: str) -> str:
    return "None" if value is None else f"<{what}>"


def _redact(value: object) -> str:
    return "None" if value is None else repr(_HIDDEN)


@attrs_repr
@attrs.frozen(repr=False)
class ShareConsumerConfig:
    """The validated configuration of a share consumer. Build it with :func:`parse_config`.

    Each attribute is one Kafka config key with the dots replaced by
    underscores (``fetch.max.wait.ms`` -> ``fetch_max_wait_ms``); defaults are
    Java's. Direct construction with Python values runs the same per-key and
    cross-field validation as :func:`parse_config`, but not the checks for
    rejected/unknown keys (an unknown keyword is a ``TypeError``) nor the
    reconnect-backoff rule that depends on which keys were given.
    """

    #: (host, port) pairs; IPv6 hosts without brackets.
    bootstrap_servers: tuple[tuple[str, int], ...] = attrs.field(
        metadata={_SPEC: _Spec(_parse_bootstrap)}
    )
    group_id: str = attrs.field(metadata={_SPEC: _Spec(_parse_group_id)})
    #: "" means the consumer generates one per instance.
    client_id: str = _key(_parse_str, "")
    #: Sent as the heartbeat RackId. None when unset (the broker refuses an empty RackId).
    client_rack: str | None = _key(_parse_optional_str, None)
    share_acknowledgement_mode: AcknowledgementMode = _key(
        _parse_ack_mode, AcknowledgementMode.IMPLICIT
    )
    share_acquire_mode: AcquireMode = _key(_parse_acquire_mode, AcquireMode.BATCH_OPTIMIZED)
    #: The network thread renews (RENEW, Kafka 4.2+) the acquisition locks of the
    #: records this consumer holds, shortly before they expire, until they are
    #: acknowledged or ``share_auto_renew_max_ms`` after their acquisition.
    share_auto_renew: bool = _key(_parse_bool, False)
    #: How long after its acquisition a record's lock is renewed at most.
    share_auto_renew_max_ms: int = _key(_int_parser(1, _INT32_MAX), 300_000)
    #: ShareFetch MaxRecords and BatchSize; a soft bound in batch_optimized mode.
    max_poll_records: int = _key(_int_parser(1, _INT32_MAX), 500)
    max_poll_interval_ms: int = _key(_int_parser(1, _INT32_MAX), 300_000)
    fetch_max_wait_ms: int = _key(_int_parser(0, _INT32_MAX), 500)
    fetch_min_bytes: int = _key(_int_parser(0, _INT32_MAX), 1)
    fetch_max_bytes: int = _key(_int_parser(0, _INT32_MAX), 52_428_800)
    #: Accepted for compatibility; share fetches have not used it since Kafka 4.1.
    max_partition_fetch_bytes: int = _key(_int_parser(0, _INT32_MAX), 1_048_576)
    check_crcs: bool = _key(_parse_bool, True)
    #: How ``poll()`` decodes records (not a Java key): "auto" decodes large
    #: batches of small records with numpy when it is installed (imported at
    #: the first such batch; ``poll()`` never needs pyarrow); "python" uses only
    #: the pure-Python row decoder, and numpy and pyarrow are imported only if
    #: ``poll_arrow()`` is called, which decodes into Arrow columns whatever this says.
    record_decoder: str = _key(_choice_parser("auto", "python"), "auto")
    #: When the consumer fetches (not a Java key): "auto" fetches ahead and in
    #: the background in ``batch_optimized`` mode, as Java's consumer does, and
    #: only for polls in ``record_limit`` mode; "manual" fetches only for a poll
    #: that waits (its fetching ends with it) and ahead of one only when the
    #: application calls ``prefetch()``, in either acquire mode, so records are
    #: acquired only when the application asks.
    fetch_ahead: str = _key(_choice_parser("auto", "manual"), "auto")
    request_timeout_ms: int = _key(_int_parser(0, _INT32_MAX), 30_000)
    default_api_timeout_ms: int = _key(_int_parser(0, _INT32_MAX), 60_000)
    retry_backoff_ms: int = _key(_int_parser(0, _INT64_MAX), 100)
    retry_backoff_max_ms: int = _key(_int_parser(0, _INT64_MAX), 1000)
    reconnect_backoff_ms: int = _key(_int_parser(0, _INT64_MAX), 50)
    reconnect_backoff_max_ms: int = _key(_int_parser(0, _INT64_MAX), 1000)
    socket_connection_setup_timeout_ms: int = _key(_int_parser(0, _INT64_MAX), 10_000)
    socket_connection_setup_timeout_max_ms: int = _key(_int_parser(0, _INT64_MAX), 30_000)
    #: A negative value disables idle-connection expiry, as in Java.
    connections_max_idle_ms: int = _key(_int_parser(-1, _INT64_MAX), 540_000)
    #: Socket SO_RCVBUF; -1 uses the OS default. Java's default is 65536, but a
    #: fixed size turns off the kernel's auto-tuning, and this client's network
    #: thread shares the GIL with the application: the kernel must be able to
    #: hold a whole ShareFetch response while the application thread runs.
    receive_buffer_bytes: int = _key(_int_parser(-1, _INT32_MAX), -1)
    #: Socket SO_SNDBUF; -1 uses the OS default.
    send_buffer_bytes: int = _key(_int_parser(-1, _INT32_MAX), 131_072)
    metadata_max_age_ms: int = _key(_int_parser(0, _INT64_MAX), 300_000)
    metadata_recovery_strategy: str = _key(_choice_parser("none", "rebootstrap"), "rebootstrap")
    metadata_recovery_rebootstrap_trigger_ms: int = _key(_int_parser(0, _INT64_MAX), 300_000)
    allow_auto_create_topics: bool = _key(_parse_bool, True)
    client_dns_lookup: str = _key(
        _choice_parser("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"),
        "use_all_dns_ips",
    )
    security_protocol: SecurityProtocol = _key(
        _parse_security_protocol, SecurityProtocol.PLAINTEXT
    )
    sasl_mechanism: SaslMechanism | None = _key(
        _parse_sasl_mechanism, None, aliases=("sasl.mechanisms",)
    )
    sasl_username: str | None = _key(_parse_optional_str, None, aliases=("sasl.plain.username",))
    sasl_password: str | None = _key(
        _parse_secret, None, secret=True, aliases=("sasl.plain.password",)
    )
    #: PEM file of CA certificates to trust; None uses the system store.
    ssl_cafile: str | None = _key(_parse_optional_str, None, aliases=("ssl.ca.location",))
    #: PEM client certificate (mutual TLS).
    ssl_certfile: str | None = _key(
        _parse_optional_str, None, aliases=("ssl.certificate.location",)
    )
    #: PEM private key of ssl_certfile.
    ssl_keyfile: str | None = _key(_parse_optional_str, None, aliases=("ssl.key.location",))
    ssl_key_password: str | None = _key(_parse_secret, None, secret=True)
    ssl_check_hostname: bool = _key(
        _parse_bool, True, aliases=("ssl.endpoint.identification.algorithm",)
    )
    #: False turns certificate verification off entirely (loudly logged).
    ssl_verify: bool = _key(_parse_bool, True, aliases=("enable.ssl.certificate.verification",))
    #: Inline PEM: CA certificates, client certificate chain, client key.
    ssl_cadata: str | None = _key(
        _parse_optional_str, None, aliases=("ssl.ca.pem", "ssl.truststore.certificates")
    )
    ssl_certdata: str | None = _key(
        _parse_optional_str,
        None,
        aliases=("ssl.certificate.pem", "ssl.keystore.certificate.chain"),
    )
    ssl_keydata: str | None = _key(
        _parse_secret, None, secret=True, aliases=("ssl.key.pem", "ssl.keystore.key")
    )
    ssl_crlfile: str | None = _key(_parse_optional_str, None, aliases=("ssl.crl.location",))
    #: OpenSSL cipher list (TLS 1.2 and older; TLS 1.3 suites are not configurable).
    ssl_ciphers: str | None = _key(_parse_optional_str, None, aliases=("ssl.cipher.suites",))
    #: "TLSv1.2,TLSv1.3" (Java's default).
    ssl_enabled_protocols: str | None = _key(_parse_tls_versions, "TLSv1.2,TLSv1.3")
    #: PKCS#12 trust/key stores (read with the optional cryptography package).
    ssl_truststore_pkcs12: str | None = _key(_parse_optional_str, None)
    ssl_truststore_pkcs12_password: str | None = _key(_parse_secret, None, secret=True)
    ssl_keystore_pkcs12: str | None = _key(_parse_optional_str, None)
    ssl_keystore_pkcs12_password: str | None = _key(_parse_secret, None, secret=True)
    #: A ready-made ssl.SSLContext; it replaces every other ssl.* setting.
    ssl_context: Any = _key(
        _parse_ssl_context, None, shown=lambda v: _object_repr(v, "SSLContext")
    )
    sasl_kerberos_service_name: str = _key(_parse_str, "kafka")
    sasl_kerberos_domain_name: str | None = _key(_parse_optional_str, None)
    sasl_kerberos_principal: str | None = _key(_parse_optional_str, None)
    #: GSSAPI: log in from this keytab as sasl.kerberos.principal (librdkafka's
    #: name; None: the ticket cache, KRB5CCNAME or kinit's default)
    sasl_kerberos_keytab: str | None = _key(_parse_optional_str, None)
    #: OAUTHBEARER token source (see kafka_share.credentials).
    sasl_oauth_token_provider: Any = _key(
        _parse_token_provider,
        None,
        aliases=("sasl.oauthbearer.token.provider", "oauth.cb"),
        shown=lambda v: _object_repr(v, "token provider"),
    )
    sasl_oauthbearer_token_endpoint_url: str | None = _key(_parse_optional_str, None)
    sasl_oauthbearer_client_credentials_client_id: str | None = _key(
        _parse_optional_str, None, aliases=("sasl.oauthbearer.client.id",)
    )
    sasl_oauthbearer_client_credentials_client_secret: str | None = _key(
        _parse_secret, None, secret=True, aliases=("sasl.oauthbearer.client.secret",)
    )
    sasl_oauthbearer_scope: str | None = _key(_parse_optional_str, None)
    #: CA file for TLS to the token endpoint (default: the system store).
    sasl_oauthbearer_cafile: str | None = _key(
        _parse_optional_str, None, aliases=("https.ca.location",)
    )
    #: Allow an http:// token endpoint (not a Java key): the client secret then
    #: travels in clear text, so only for a local test endpoint.
    sasl_oauthbearer_token_endpoint_allow_http: bool = _key(_parse_bool, False)
    #: When an OAUTHBEARER token is refreshed, as Java's login refresh: at this
    #: fraction of its lifetime (plus up to ``jitter`` more), but not within
    #: ``buffer`` seconds of its expiry nor sooner than ``min.period`` seconds
    #: after the last fetch (see ``credentials.TokenRefreshPolicy``).
    sasl_login_refresh_window_factor: float = _key(_float_parser(0.5, 1.0), 0.8)
    sasl_login_refresh_window_jitter: float = _key(_float_parser(0.0, 0.25), 0.05)
    sasl_login_refresh_min_period_seconds: int = _key(_int_parser(0, 900), 60)
    sasl_login_refresh_buffer_seconds: int = _key(_int_parser(0, 3600), 300)
    #: Backoff between attempts to fetch a token (OIDC client credentials).
    sasl_login_retry_backoff_ms: int = _key(_int_parser(0, _INT64_MAX), 100)
    sasl_login_retry_backoff_max_ms: int = _key(_int_parser(0, _INT64_MAX), 10_000)
    key_deserializer: Deserializer | None = _key(_parse_deserializer, None)
    value_deserializer: Deserializer | None = _key(_parse_deserializer, None)
    metrics_sample_window_ms: int = _key(_int_parser(0, _INT64_MAX), 30_000)
    metrics_num_samples: int = _key(_int_parser(1, _INT32_MAX), 2)
    metrics_recording_level: str = _key(_choice_parser("INFO", "DEBUG", "TRACE"), "INFO")
    #: Push metrics to the cluster when it asks for them (KIP-714 client telemetry).
    enable_metrics_push: bool = _key(_parse_bool, True)

    def __attrs_post_init__(self) -> None:
        problems: list[str] = []
        values: dict[str, object] = {}
        fields = attrs.fields_dict(type(self))
        for key, spec in _SPECS.items():
            raw = getattr(self, _attr(key))
            if raw is None:
                values[key] = None
                if key in _REQUIRED_KEYS:
                    problems.append(_missing_message(key))
                elif fields[_attr(key)].default is not None:
                    problems.append(
                        f"Configuration {key} must not be None; leave it out to use "
                        f"the default {fields[_attr(key)].default!r}"
                    )
                continue
            try:
                values[key] = spec.parse(raw)
            except _InvalidValueError as exc:
                problems.append(_invalid_message(key, raw, str(exc)))
        if not problems:
            problems.extend(_cross_field_problems(values))
        if problems:
            raise ConfigError(_join(problems))
        _apply_java_clamps(values)
        # Frozen to the outside; normalising our own fields during construction is fine.
        for key, value in values.items():
            object.__setattr__(self, _attr(key), value)

    def to_properties(self, *, redact: bool = True) -> dict[str, object]:
        """Every setting under its Kafka key, e.g. for logging the effective config.

        Enums become their config strings and ``bootstrap.servers`` the
        ``"host:port,..."`` string. With ``redact`` (the default) secrets read
        ``"[hidden]"``; without it, ``parse_config(c.to_properties(redact=False)) == c``.
        """
        properties: dict[str, object] = {}
        for key in _SPECS:
            value: object = getattr(self, _attr(key))
            if key == "bootstrap.servers":
                value = _format_bootstrap(self.bootstrap_servers)
            elif isinstance(value, enum.Enum):
                value = str(value)
            if redact and key in _SECRET_KEYS and value is not None:
                value = _HIDDEN
            properties[key] = value
        return properties



# Every supported key, in the order of ShareConsumerConfig's fields.
_SPECS: Final[Mapping[str, _Spec]] = {
    field.name.replace("_", "."): field.metadata[_SPEC]
    for field in attrs.fields(ShareConsumerConfig)
}
_ALIASES: Final[Mapping[str, str]] = {
    alias: key for key, spec in _SPECS.items() for alias in spec.aliases
}
_SECRET_KEYS: Final = frozenset(
    {_JAAS_KEY, *(f"ssl.{kind}.password" for kind in _STORE_KINDS)}
    | {k for k, s in _SPECS.items() if s.secret}
    | {alias for alias, key in _ALIASES.items() if _SPECS[key].secret}
)
_KNOWN_KEYS: Final = (*_SPECS, _JAAS_KEY, *_ALIASES, *_STORE_KEYS, *_IGNORED_KEYS)
_REQUIRED_KEYS: Final = tuple(
    field.name.replace("_", ".")
    for field in attrs.fields(ShareConsumerConfig)
    if field.default is attrs.NOTHING
)

def _missing_message(key: str) -> str:
    if key == "group.id":
        return f"Missing configuration group.id: {_GROUP_ID_MESSAGE}"
    return (
        f'Missing required configuration "{key}" which has no default value; '
        f'e.g. {_attr(key)}="localhost:9092"'
    )


def _cross_field_problems(values: Mapping[str, Any]) -> list[str]:
    """Checks across keys. ``values`` holds every key, each already valid."""
    problems: list[str] = []
    wait, timeout = values["fetch.max.wait.ms"], values["request.timeout.ms"]
    if wait >= timeout:
        problems.append(
            f"fetch.max.wait.ms ({wait}) must be less than request.timeout.ms ({timeout}): "
            "the broker holds a ShareFetch for up to fetch.max.wait.ms, so the request "
            "would time out first; lower fetch.max.wait.ms or raise request.timeout.ms"
        )
    protocol: SecurityProtocol = values["security.protocol"]
    problems += _sasl_problems(values, protocol)
    problems += _ssl_problems(values, protocol)
    return problems


def _sasl_problems(values: Mapping[str, Any], protocol: SecurityProtocol) -> list[str]:
    problems: list[str] = []
    sasl_keys = ("sasl.mechanism", "sasl.username", "sasl.password")
    mechanism = values["sasl.mechanism"]
    if protocol.uses_sasl:
        if mechanism is None or mechanism.uses_password:
            missing = [key for key in sasl_keys if values[key] is None]
        else:
            missing = []
        if missing:
            problems.append(
                f"security.protocol={protocol.value} needs {', '.join(missing)}: set "
                "sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI) "
                "and, for PLAIN and SCRAM, the credentials with sasl.username/sasl.password "
                "or sasl.jaas.config"
            )
        if mechanism is SaslMechanism.OAUTHBEARER:
            problems += _oauth_problems(values)
        if mechanism is SaslMechanism.GSSAPI:
            problems += _keytab_problems(values["sasl.kerberos.keytab"],
                                         values["sasl.kerberos.principal"])
    else:
        given = [key for key in sasl_keys if values[key] is not None]
        if given:
            problems.append(
                f"{', '.join(given)} set but security.protocol={protocol.value} does not use "
                "SASL; set security.protocol to SASL_PLAINTEXT or SASL_SSL"
            )
    return problems


def _oauth_problems(values: Mapping[str, Any]) -> list[str]:
    provider = values["sasl.oauth.token.provider"]
    url = values["sasl.oauthbearer.token.endpoint.url"]
    if provider is None and url is None:
        return [
            "sasl.mechanism=OAUTHBEARER needs a token source: pass "
            "sasl_oauth_token_provider= (a callable returning a token) or set "
            "sasl.oauthbearer.token.endpoint.url with "
            "sasl.oauthbearer.client.credentials.client.id and .client.secret"
        ]
    if provider is not None and url is not None:
        return [
            "sasl_oauth_token_provider and sasl.oauthbearer.token.endpoint.url are "
            "both set; give one token source"
        ]
    if url is not None and (
        values["sasl.oauthbearer.client.credentials.client.id"] is None
        or values["sasl.oauthbearer.client.credentials.client.secret"] is None
    ):
        return [
            "sasl.oauthbearer.token.endpoint.url needs "
            "sasl.oauthbearer.client.credentials.client.id and "
            "sasl.oauthbearer.client.credentials.client.secret"
        ]
    return []


def _ssl_problems(values: Mapping[str, Any], protocol: SecurityProtocol) -> list[str]:
    problems: list[str] = []
    ssl_keys = (
        "ssl.cafile", "ssl.certfile", "ssl.keyfile", "ssl.key.password", "ssl.cadata",
        "ssl.certdata", "ssl.keydata", "ssl.crlfile", "ssl.ciphers", "ssl.context",
        "ssl.truststore.pkcs12", "ssl.keystore.pkcs12",
    )
    if values["ssl.context"] is not None:
        others = [k for k in ssl_keys if k != "ssl.context" and values[k] is not None]
        if others:
            problems.append(
                f"ssl_context is given together with {', '.join(others)}; an SSLContext "
                "replaces every other ssl.* setting: load them into the context instead"
            )
    if not protocol.uses_ssl:
        given = [key for key in ssl_keys if values[key] is not None]
        if given:
            problems.append(
                f"{', '.join(given)} set but security.protocol={protocol.value} does not use "
                "TLS; set security.protocol to SSL or SASL_SSL"
            )
    if values["ssl.keydata"] is not None and values["ssl.certdata"] is None:
        problems.append("ssl.keydata is set without ssl.certdata; give the certificate chain too")
    if values["ssl.keyfile"] is not None and values["ssl.certfile"] is None:
        problems.append("ssl.keyfile is set without ssl.certfile; give the client certificate too")
    if values["ssl.key.password"] is not None and (
        values["ssl.keyfile"] is None and values["ssl.keydata"] is None
    ):
        problems.append("ssl.key.password is set without ssl.keyfile; give the private key file")
    return problems


def _apply_java_clamps(values: dict[str, object]) -> None:
    """Store the values Java would effectively use where it only warns."""
    for low, high, what in (
        ("retry.backoff.ms", "retry.backoff.max.ms", "backoff"),
        (
            "socket.connection.setup.timeout.ms",
            "socket.connection.setup.timeout.max.ms",
            "connection setup timeout",
        ),
    ):
        low_value, high_value = values[low], values[high]
        assert isinstance(low_value, int) and isinstance(high_value, int)
        if low_value > high_value:
            _log.warning(
                "Configuration %s=%d is greater than %s=%d; a static %s of %d ms will be applied",
                low,
                low_value,
                high,
                high_value,
                what,
                high_value,
            )
            values[low] = high_value


def _join(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} configuration problems:\n" + "\n".join(f"  - {p}" for p in problems)


def _same(first: object, second: object) -> bool:
    if first is second:
        return True
    try:
        return bool(first == second)
    except Exception:  # a value with a broken __eq__ is simply "different"
        return False


def _unknown_key_message(written: str, key: str) -> str:
    hint = _UNKNOWN_KEY_HINTS.get(key)
    if hint is not None:
        return f"Unknown configuration {written!r}: {hint}"
    if key in SHARE_GROUP_CONFIGS:
        return (
            f"{written!r} is a share-group config, not a consumer setting: set it "
            f"{_GROUP_CONFIG_HOW}"
        )
    message = f"Unknown configuration {written!r}"
    import difflib  # noqa: PLC0415  (only to word an error)

    matches = difflib.get_close_matches(key.lower(), _KNOWN_KEYS, n=1, cutoff=0.7)
    if matches:
        suggestion = matches[0]
        keyword = f" (keyword {_attr(suggestion)})" if "_" in written else ""
        message += f": did you mean {suggestion!r}{keyword}?"
    return message


def parse_config(
    config: Mapping[str, object] | None = None, /, **kwargs: object
) -> ShareConsumerConfig:
    """Build a validated :class:`ShareConsumerConfig`.

    Args:
        config: Kafka properties with dotted keys, e.g.
            ``{"bootstrap.servers": "localhost:9092", "group.id": "g"}``.
        **kwargs: the same settings as Python names, e.g.
            ``group_id="g", share_acknowledgement_mode="explicit"``.

    A key may be given both ways only with the same value. ``None`` means
    "use the default". ``sasl.jaas.config`` (PlainLoginModule or
    ScramLoginModule) is an alternative to ``sasl.username``/``sasl.password``.

    Raises:
        ConfigError: naming every invalid, rejected, unknown or missing key and
            how to fix it.
    """
    problems: list[str] = []
    given = _given_keys(config, kwargs, problems)
    problems.extend(_resolve_aliases(given))
    rejected = [key for key in given if key in REJECTED_KEYS]
    if rejected:
        problems.append(
            f"{', '.join(rejected)} cannot be set when using a share group:\n"
            + "\n".join(f"    {key}: {REJECTED_KEYS[key]}" for key in rejected)
        )
    for key, (written, _) in given.items():
        if key not in REJECTED_KEYS and key not in _SPECS and key != _JAAS_KEY:
            problems.append(_unknown_key_message(written, key))

    typed = _typed_values(given, problems)

    for key in _REQUIRED_KEYS:
        if key not in typed and given.get(key, ("", None))[1] is None:
            problems.append(_missing_message(key))
    if problems:
        raise ConfigError(_join(problems))

    # Java: reconnect.backoff.ms without reconnect.backoff.max.ms disables the
    # exponential reconnect backoff.
    if "reconnect.backoff.ms" in typed and "reconnect.backoff.max.ms" not in typed:
        typed["reconnect.backoff.max.ms"] = typed["reconnect.backoff.ms"]
    return ShareConsumerConfig(**{_attr(key): value for key, value in typed.items()})


def _given_keys(
    config: Mapping[str, object] | None, kwargs: Mapping[str, object], problems: list[str]
) -> dict[str, tuple[str, object]]:
    """normalised key -> (key as written, value), from both ways of giving
    settings; keys that are not usable or given twice differently go to
    ``problems``."""
    given: dict[str, tuple[str, object]] = {}  # normalised key -> (key as written, value)
    sources: list[Iterable[tuple[object, object]]] = []
    if config is not None:
        if not isinstance(config, Mapping):
            raise ConfigError(
                f"the configuration must be a mapping of keys to values, got {_type_name(config)}"
            )
        sources.append(config.items())
    sources.append(kwargs.items())
    for items in sources:
        for written, value in items:
            if not isinstance(written, str):
                problems.append(f"Configuration keys must be strings, got {written!r}")
                continue
            if not written.strip():
                problems.append(f"Configuration keys must be non-empty, got {written!r}")
                continue
            if written != written.strip():
                problems.append(
                    f"Configuration key {written!r} has surrounding whitespace; "
                    f"use {written.strip()!r}"
                )
                continue
            key = written.replace("_", ".")
            if key in given:
                first_written, first_value = given[key]
                if not _same(first_value, value):
                    problems.append(
                        f"Configuration {key} is given twice with different values "
                        f"({first_written!r}={_shown(key, first_value)} and "
                        f"{written!r}={_shown(key, value)}); give it once"
                    )
                continue
            given[key] = (written, value)

    return given


def _typed_values(given: Mapping[str, tuple[str, object]], problems: list[str]) -> dict[str, Any]:
    """Each known key's value parsed (and ``sasl.jaas.config`` merged in);
    invalid values go to ``problems``."""
    typed: dict[str, Any] = {}
    for key, (_, value) in given.items():
        spec = _SPECS.get(key)
        if spec is None or value is None:
            continue
        try:
            typed[key] = spec.parse(value)
        except _InvalidValueError as exc:
            problems.append(_invalid_message(key, value, str(exc)))

    jaas = given.get(_JAAS_KEY, ("", None))[1]
    if jaas is not None:
        try:
            login = _parse_jaas(jaas)
        except _InvalidValueError as exc:
            problems.append(_invalid_message(_JAAS_KEY, jaas, str(exc)))
        else:
            problems.extend(_merge_jaas(login, typed))
    return typed


def _resolve_aliases(given: dict[str, tuple[str, object]]) -> list[str]:
    """Rewrite other clients' key names (in place) to ours; report conflicts and
    key stores Python cannot read."""
    problems: list[str] = []

    def put(key: str, written: str, value: object) -> None:
        if key in given and not _same(given[key][1], value):
            problems.append(
                f"{written!r} and {given[key][0]!r} both set {key} with different values "
                f"({_shown(key, value)} and {_shown(key, given[key][1])}); give it once"
            )
            return
        given.setdefault(key, (written, value))

    for alias in [k for k in given if k in _ALIASES]:
        written, value = given.pop(alias)
        key = _ALIASES[alias]
        if alias == "ssl.endpoint.identification.algorithm":
            if value is None:
                continue  # None means "not given", as for every key: the default, https
            text = str(value).strip().lower()
            if text not in ("https", "", "none"):
                problems.append(
                    f"Invalid value {value!r} for configuration {alias}: use 'https' to check "
                    "the broker's host name, or '' / 'none' to turn the check off"
                )
                continue
            value = text == "https"
        put(key, written, value)
    for key, choices in _IGNORED_KEYS.items():
        if key in given:
            written, value = given.pop(key)
            if value is not None and str(value).strip().lower() not in {
                c.lower() for c in choices
            }:
                problems.append(
                    f"Invalid value {value!r} for configuration {written}: supported are "
                    + ", ".join(choices)
                )
    for kind, target in (("truststore", "ssl.cafile"), ("keystore", "ssl.certfile")):
        problems += _resolve_store(given, kind, target, put)
    return problems


def _resolve_store(
    given: dict[str, tuple[str, object]], kind: str, target: str,
    put: Callable[[str, str, object], None],
) -> list[str]:
    """Java's ssl.<kind>.type/location/password (``kind``: truststore or
    keystore) as our keys: a PKCS12 store, or PEM files (``target``)."""
    problems: list[str] = []
    type_entry = given.pop(f"ssl.{kind}.type", None)
    location_entry = given.pop(f"ssl.{kind}.location", None)
    password_entry = given.pop(f"ssl.{kind}.password", None)
    store_type = str(type_entry[1]).strip().upper() if type_entry and type_entry[1] else None
    if store_type is None and location_entry is not None and str(
        location_entry[1]
    ).lower().endswith((".p12", ".pfx")):
        store_type = "PKCS12"  # librdkafka's ssl.keystore.location is always PKCS#12
    inline = (
        "ssl.cadata" if kind == "truststore" else "ssl.certdata"
    ) in given
    if store_type == "PKCS12" and location_entry is not None:
        put(f"ssl.{kind}.pkcs12", location_entry[0], location_entry[1])
        if password_entry is not None:
            put(f"ssl.{kind}.pkcs12.password", password_entry[0], password_entry[1])
        return problems
    if store_type == "PKCS12":
        problems.append(f"ssl.{kind}.type=PKCS12 needs ssl.{kind}.location (the .p12 file)")
        return problems
    if password_entry is not None:
        problems.append(
            f"Unknown configuration {password_entry[0]!r}: "
            + _UNKNOWN_KEY_HINTS[f"ssl.{kind}.password"]
        )
    if store_type is None and location_entry is None:
        return problems
    if store_type == "JKS" or (store_type is None and not inline):
        what = store_type or "JKS (Java's default ssl." + kind + ".type)"
        problems.append(f"ssl.{kind}.type {what} is not supported: {_KEYTOOL_HINT}")
        return problems
    if store_type != "PEM":
        problems.append(
            f"Invalid value {store_type!r} for configuration ssl.{kind}.type: "
            "use PEM or PKCS12"
        )
        return problems
    if location_entry is not None:
        put(target, location_entry[0], location_entry[1])
        if kind == "keystore":
            # Java's PEM key store: the private key and the chain in one file.
            put("ssl.keyfile", location_entry[0], location_entry[1])
    return problems


#: The group id an admin client's config gets when none is given: admin clients
#: join no group, and the consumer's parser requires one.
ADMIN_PLACEHOLDER_GROUP_ID = "kafka-share-admin"


def parse_admin_config(
    config: Mapping[str, object] | None = None, /, **kwargs: object
) -> ShareConsumerConfig:
    """Parse the config of an admin client (:class:`kafka_share.admin.Admin`).

    The same keys, keywords and validation as :func:`parse_config` (so one
    properties file serves consumers, admin clients and the command line,
    security settings included), except that ``group.id`` is optional: an
    admin client joins no group, and ignores it when given.

    Raises:
        ConfigError: as :func:`parse_config`.
    """
    given: set[str] = set()
    if isinstance(config, Mapping):
        given.update(str(k).replace("_", ".") for k, v in config.items() if v is not None)
    given.update(k.replace("_", ".") for k, v in kwargs.items() if v is not None)
    if "group.id" not in given:
        kwargs = {**{k: v for k, v in kwargs.items() if k.replace("_", ".") != "group.id"},
                  "group_id": ADMIN_PLACEHOLDER_GROUP_ID}
        if isinstance(config, Mapping):
            config = {k: v for k, v in config.items() if str(k).replace("_", ".") != "group.id"}
    return parse_config(config, **kwargs)


def _merge_jaas(login: _JaasLogin, typed: dict[str, Any]) -> list[str]:
    """Move the JAAS credentials into sasl.username/sasl.password."""
    problems: list[str] = []
    if login.module == _OAUTH_MODULE:
        clash = [key for key in login.oauth if key in typed]
        if clash:
            problems.append(
                f"sasl.jaas.config and {', '.join(clash)} are both set; give them one way only"
            )
    both = [
        key for key in ("sasl.username", "sasl.password")
        if key in typed and login.username is not None
    ]
    if both:
        problems.append(
            f"sasl.jaas.config and {', '.join(both)} are both set; "
            "give the credentials one way only"
        )
    mechanism = typed.get("sasl.mechanism")
    allowed = _JAAS_MODULES[login.module]
    if isinstance(mechanism, SaslMechanism) and mechanism not in allowed:
        problems.append(
            f"sasl.jaas.config uses {login.module.rsplit('.', 1)[-1]}, which does not "
            f"match sasl.mechanism={mechanism.value}; use " + " or ".join(m.value for m in allowed)
        )
    if not problems:
        if login.username is not None:
            typed["sasl.username"] = login.username
            typed["sasl.password"] = login.password
        typed.update(login.oauth)
    return problems
