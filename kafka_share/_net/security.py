"""What a connection needs to secure itself: the TLS context and the SASL
credentials, built once per client from its config.

OAUTHBEARER tokens come from a user provider or the OIDC client-credentials
provider; both may block, so :class:`TokenSource` calls them on a helper
thread and the connection waits (without blocking the network thread) until
the token is there. The source asks for a new token once the cached one is
past 80 % of its lifetime, so re-authentication gets a fresh token.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.config import (
    SaslMechanism,
    SecurityProtocol,
    ShareConsumerConfig,
)
from kafka_share.credentials import (
    ClientCredentialsTokenProvider,
    OAuthToken,
    OAuthTokenProvider,
    TokenRefreshPolicy,
    as_token_provider,
    fetch_in_background,
    refresh_at_s,
)
from kafka_share.errors import AuthenticationError, KafkaError

from .sasl import (
    GssapiMechanism,
    OAuthBearerMechanism,
    PlainMechanism,
    SaslClientMechanism,
    ScramMechanism,
    import_gssapi,
)
from .tls import build_ssl_context

__all__ = ["ConnectionSecurity", "TokenSource", "security_from_config"]


class TokenSource:
    """The current OAUTHBEARER token, fetched off the network thread."""

    def __init__(
        self,
        provider: OAuthTokenProvider,
        refresh: TokenRefreshPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._provider = provider
        self.refresh = refresh or TokenRefreshPolicy()
        self._clock = clock
        self._lock = threading.Lock()
        self._token: OAuthToken | None = None
        #: when to fetch the next token (sasl.login.refresh.*)
        self._refresh_at_s = 0.0
        self._error: KafkaError | None = None
        self._fetching = False
        #: Called (from the helper thread) when a fetch ends; the network client
        #: sets it to its wakeup so waiting connections go on at once.
        self.on_update: Callable[[], None] | None = None

    def _fresh(self, token: OAuthToken, now_s: float) -> bool:
        # A token without an expiry never needs replacing (a callable's opaque token).
        return token.expires_at_ms is None or now_s < self._refresh_at_s

    def current(self) -> OAuthToken | None:
        """The token to authenticate with now, or None while one is being fetched.
        Raises the provider's failure once (the next call fetches again)."""
        with self._lock:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            now_s = self._clock()
            token = self._token
            if token is not None and self._fresh(token, now_s):
                return token
            if not self._fetching:
                self._fetching = True
                fetch_in_background(self._provider, self._done)
            # An old token that has not expired yet still works while a new one comes.
            if token is not None and (
                token.expires_at_ms is None or token.expires_at_ms / 1000 > now_s + 1
            ):
                return token
            return None

    def _done(self, token: OAuthToken | None, error: Exception | None) -> None:
        with self._lock:
            self._fetching = False
            if token is not None:
                self._token = token
                now_s = self._clock()
                self._refresh_at_s = refresh_at_s(self.refresh, token, now_s, now_s)
            elif isinstance(error, KafkaError):
                self._error = error
            else:
                self._error = AuthenticationError(
                    f"the OAUTHBEARER token provider failed: {type(error).__name__}: {error}"
                )
        hook = self.on_update
        if hook is not None:
            hook()


@attrs_repr
@attrs.frozen(repr=False)
class ConnectionSecurity:
    """The security settings of every connection of one client."""

    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    mechanism: SaslMechanism | None = None
    username: str | None = None
    password: str | None = attrs.field(default=None, repr=False)
    token_source: TokenSource | None = None
    kerberos_service_name: str = "kafka"
    kerberos_domain_name: str | None = None
    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None

    def new_mechanism(self, host: str) -> SaslClientMechanism | None:
        """A fresh mechanism for one (re-)authentication; None while an OAUTHBEARER
        token is still being fetched. Raises AuthenticationError."""
        mechanism = self.mechanism
        if mechanism is SaslMechanism.PLAIN:
            assert self.username is not None and self.password is not None
            return PlainMechanism(self.username, self.password)
        if mechanism in (SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512):
            assert self.username is not None and self.password is not None
            return ScramMechanism(mechanism.value, self.username, self.password)
        if mechanism is SaslMechanism.OAUTHBEARER:
            assert self.token_source is not None
            token = self.token_source.current()
            return None if token is None else OAuthBearerMechanism(token)
        if mechanism is SaslMechanism.GSSAPI:
            return GssapiMechanism(
                self.kerberos_service_name, self.kerberos_domain_name or host,
                self.kerberos_principal, self.kerberos_keytab,
            )
        raise AuthenticationError(f"no SASL mechanism configured for {self.protocol.value}")


def security_from_config(config: ShareConsumerConfig) -> ConnectionSecurity:
    """Build the TLS context and SASL credentials (ConfigError when unusable)."""
    protocol = config.security_protocol
    context = build_ssl_context(config) if protocol.uses_ssl else None
    if not protocol.uses_sasl:
        return ConnectionSecurity(protocol, context)
    mechanism = config.sasl_mechanism
    source: TokenSource | None = None
    if mechanism is SaslMechanism.OAUTHBEARER:
        provider: OAuthTokenProvider
        if config.sasl_oauth_token_provider is not None:
            provider = as_token_provider(config.sasl_oauth_token_provider)
        else:
            assert config.sasl_oauthbearer_token_endpoint_url is not None
            assert config.sasl_oauthbearer_client_credentials_client_id is not None
            assert config.sasl_oauthbearer_client_credentials_client_secret is not None
            http_context = None
            if config.sasl_oauthbearer_cafile is not None:
                http_context = ssl.create_default_context(cafile=config.sasl_oauthbearer_cafile)
            provider = ClientCredentialsTokenProvider(
                config.sasl_oauthbearer_token_endpoint_url,
                client_id=config.sasl_oauthbearer_client_credentials_client_id,
                client_secret=config.sasl_oauthbearer_client_credentials_client_secret,
                scope=config.sasl_oauthbearer_scope,
                ssl_context=http_context,
                allow_http=config.sasl_oauthbearer_token_endpoint_allow_http,
                retry_backoff_ms=config.sasl_login_retry_backoff_ms,
                retry_backoff_max_ms=config.sasl_login_retry_backoff_max_ms,
                cache=False,  # the TokenSource is this client's cache
            )
        source = TokenSource(provider, TokenRefreshPolicy(
            window_factor=config.sasl_login_refresh_window_factor,
            window_jitter=config.sasl_login_refresh_window_jitter,
            min_period_s=config.sasl_login_refresh_min_period_seconds,
            buffer_s=config.sasl_login_refresh_buffer_seconds,
        ))
    elif mechanism is SaslMechanism.GSSAPI:
        import_gssapi()
    return ConnectionSecurity(
        protocol,
        context,
        mechanism,
        config.sasl_username,
        config.sasl_password,
        source,
        config.sasl_kerberos_service_name,
        config.sasl_kerberos_domain_name,
        config.sasl_kerberos_principal,
        config.sasl_kerberos_keytab,
    )
