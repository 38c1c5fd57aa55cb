"""Checks of a configuration's security settings that need no TLS or SASL code.

Kept apart from :mod:`kafka_share._net.security` so that a PLAINTEXT client
never imports the TLS, SASL and token-provider modules (with ``http.client``
and ``tempfile``): they load only for a protocol that uses them.
"""

from __future__ import annotations

from kafka_share.config import (
    IMPLEMENTED_SECURITY_PROTOCOLS,
    SaslMechanism,
    SecurityProtocol,
    ShareConsumerConfig,
)
from kafka_share.errors import ConfigError

__all__ = ["cleartext_credentials_warning", "validate_supported"]


def cleartext_credentials_warning(config: ShareConsumerConfig) -> str | None:
    """The warning for credentials that a SASL_PLAINTEXT listener would carry
    readable by anyone on the network path (None when there are none: GSSAPI
    never sends its secret, and TLS protects the rest)."""
    mechanism = config.sasl_mechanism
    if config.security_protocol is not SecurityProtocol.SASL_PLAINTEXT or mechanism in (
        None, SaslMechanism.GSSAPI,
    ):
        return None
    what = {
        SaslMechanism.PLAIN: "the password",
        SaslMechanism.OAUTHBEARER: "the access token",
    }.get(mechanism, "the SCRAM exchange (open to offline guessing of the password)")
    return (
        f"security.protocol=SASL_PLAINTEXT with sasl.mechanism={mechanism.value}: "
        f"{what} and every record travel unencrypted; use SASL_SSL outside a trusted network"
    )


def validate_supported(config: ShareConsumerConfig) -> None:
    """Raise ConfigError for settings that parse but cannot be used here: a
    protocol not implemented, TLS files that do not load, GSSAPI without its
    optional package. Called by whoever validates a configuration (the
    facades, the admin client, the Spark source's option check)."""
    if config.security_protocol not in IMPLEMENTED_SECURITY_PROTOCOLS:
        implemented = ", ".join(sorted(p.value for p in IMPLEMENTED_SECURITY_PROTOCOLS))
        raise ConfigError(
            f"security.protocol={config.security_protocol.value} is not implemented by "
            f"this client yet; implemented: {implemented}"
        )
    if config.security_protocol is not SecurityProtocol.PLAINTEXT:
        from kafka_share._net.security import security_from_config  # noqa: PLC0415

        security_from_config(config)  # builds the TLS context and credentials, or says why not
