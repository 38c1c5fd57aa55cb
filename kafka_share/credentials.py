"""Credentials for OAUTHBEARER: tokens and the providers that make them.

A *token provider* is what ``sasl_oauth_token_provider=`` takes. Any of these
work:

* an :class:`OAuthTokenProvider` (an object with ``token() -> OAuthToken``);
* a callable returning an :class:`OAuthToken`, a token string, or a
  ``(token, expiry_epoch_seconds)`` / ``(token, expiry, principal, extensions)``
  tuple (confluent-kafka's ``oauth_cb`` signature, called with no argument);
* an object with a ``token()`` method returning a string (kafka-python style)
  and optionally ``extensions() -> dict``.

The provider is called on a helper thread, never on the network thread: it may
block (an HTTP call to an identity provider). The consumer asks again before
every (re-)authentication, so a provider that caches and refreshes its token is
enough. :class:`ClientCredentialsTokenProvider` is a built-in OIDC
``client_credentials`` provider (``sasl.oauthbearer.token.endpoint.url``).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from kafka_share.errors import AuthenticationError, ConfigError

__all__ = [
    "ClientCredentialsTokenProvider",
    "OAuthToken",
    "OAuthTokenProvider",
    "as_token_provider",
    "jwt_claims",
]

log = logging.getLogger("kafka_share.credentials")


def _hide(_: object) -> str:
    return "'[hidden]'"


@attrs.frozen
class OAuthToken:
    """An OAUTHBEARER access token. ``value`` is never shown in ``repr``."""

    value: str = attrs.field(repr=_hide)
    #: When the token expires (milliseconds since the epoch); None if unknown.
    expires_at_ms: int | None = None
    principal: str | None = None
    extensions: Mapping[str, str] = attrs.field(factory=dict)


@runtime_checkable
class OAuthTokenProvider(Protocol):
    """Returns the current token; may block (it runs on a helper thread)."""

    def token(self) -> OAuthToken: ...


def jwt_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without checking its signature (as Java's client
    does, only to learn ``exp`` and ``sub``). Empty for an opaque token."""
    parts = token.split(".")
    if len(parts) < 2:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def _token_from(value: Any) -> OAuthToken:
    if isinstance(value, OAuthToken):
        return value
    if isinstance(value, str):
        exp = jwt_claims(value).get("exp")
        return OAuthToken(value, int(exp * 1000) if isinstance(exp, int | float) else None)
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        token = value[0]
        expiry = value[1] if len(value) > 1 else None
        principal = value[2] if len(value) > 2 else None
        extensions = value[3] if len(value) > 3 and value[3] else {}
        return OAuthToken(
            token,
            int(float(expiry) * 1000) if expiry is not None else None,
            principal,
            dict(extensions),
        )
    raise AuthenticationError(
        f"the OAUTHBEARER token provider returned a {type(value).__name__}; expected an "
        "OAuthToken, a token string or a (token, expiry_epoch_seconds) tuple"
    )


class _CallableProvider:
    def __init__(self, source: Any) -> None:
        self._source = source

    def token(self) -> OAuthToken:
        source = self._source
        if callable(getattr(source, "token", None)):
            value = source.token()
            if isinstance(value, str) and callable(getattr(source, "extensions", None)):
                return OAuthToken(value, _token_from(value).expires_at_ms,
                                  extensions=dict(source.extensions() or {}))
            return _token_from(value)
        try:
            return _token_from(source())
        except TypeError:
            # confluent-kafka's oauth_cb takes the sasl.oauthbearer.config string.
            return _token_from(source(None))


def as_token_provider(source: object) -> OAuthTokenProvider:
    """Wrap whatever ``sasl_oauth_token_provider`` was given (see the module doc)."""
    if callable(source) or callable(getattr(source, "token", None)):
        return _CallableProvider(source)
    raise ConfigError(
        "sasl.oauth.token.provider must be a callable or an object with a token() method, "
        f"got {type(source).__name__}"
    )


class ClientCredentialsTokenProvider:
    """OIDC ``client_credentials`` grant (KIP-768) against a token endpoint.

    POSTs ``grant_type=client_credentials`` (and ``scope``) with HTTP Basic
    client authentication, form-encoded, and caches the access token until the
    refresh point Java uses: 80 % (+ up to 5 % jitter) of its lifetime, taken
    from the JWT's ``exp`` or else the response's ``expires_in``. Failures
    other than HTTP 4xx are retried with exponential backoff
    (``retry_backoff_ms`` up to ``retry_backoff_max_ms``) within one call.
    """

    def __init__(
        self,
        token_endpoint_url: str,
        *,
        client_id: str,
        client_secret: str,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
        max_attempts: int = 5,
    ) -> None:
        if not token_endpoint_url.startswith(("http://", "https://")):
            raise ConfigError(
                "sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL, got "
                f"{token_endpoint_url!r}"
            )
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.extensions = dict(extensions or {})
        self._ssl_context = ssl_context
        self._timeout_s = timeout_s
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._max_attempts = max_attempts
        self._lock = threading.Lock()
        self._cached: OAuthToken | None = None
        self._refresh_at_s = 0.0
        #: How many token requests were made (for tests and metrics).
        self.requests = 0

    def __repr__(self) -> str:
        return (
            f"ClientCredentialsTokenProvider({self.token_endpoint_url!r}, "
            f"client_id={self.client_id!r}, client_secret='[hidden]', scope={self.scope!r})"
        )

    def token(self) -> OAuthToken:
        with self._lock:
            now = time.time()
            if self._cached is not None and now < self._refresh_at_s:
                return self._cached
            token = self._fetch_with_retries()
            self._cached = token
            if token.expires_at_ms is not None:
                lifetime_s = max(0.0, token.expires_at_ms / 1000 - now)
                self._refresh_at_s = now + lifetime_s * (0.8 + 0.05 * random.random())
            else:
                self._refresh_at_s = now + 60.0
            return token

    def _fetch_with_retries(self) -> OAuthToken:
        delay_ms = self._backoff_ms
        for attempt in range(1, self._max_attempts + 1):
            try:
                return self._fetch()
            except _RetriableError as exc:
                if attempt == self._max_attempts:
                    raise AuthenticationError(
                        f"could not get an OAUTHBEARER token from {self.token_endpoint_url} "
                        f"after {attempt} attempts: {exc}"
                    ) from None
                time.sleep(delay_ms / 1000)
                delay_ms = min(self._backoff_max_ms, delay_ms * 2)
        raise AssertionError("unreachable")

    def _fetch(self) -> OAuthToken:
        self.requests += 1
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(
            f"{urllib.parse.quote(self.client_id, safe='')}:"
            f"{urllib.parse.quote(self._client_secret, safe='')}".encode()
        ).decode()
        request = urllib.request.Request(
            self.token_endpoint_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Accept": "application/json",
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Cache-Control": "no-cache",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout_s, context=self._ssl_context
            ) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500:
                raise AuthenticationError(
                    f"the token endpoint {self.token_endpoint_url} refused the client "
                    f"credentials of client id {self.client_id!r}: HTTP {exc.code} {exc.reason}"
                ) from None
            raise _RetriableError(f"HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise _RetriableError(str(exc)) from None
        try:
            document = json.loads(body)
            access_token = document["access_token"]
        except (ValueError, KeyError, TypeError):
            raise AuthenticationError(
                f"the token endpoint {self.token_endpoint_url} answered without an access_token"
            ) from None
        claims = jwt_claims(access_token)
        expires_at_ms: int | None = None
        if isinstance(claims.get("exp"), int | float):
            expires_at_ms = int(claims["exp"] * 1000)
        elif isinstance(document.get("expires_in"), int | float):
            expires_at_ms = int((time.time() + document["expires_in"]) * 1000)
        sub = claims.get("sub")
        return OAuthToken(
            access_token, expires_at_ms, sub if isinstance(sub, str) else None, self.extensions
        )


class _RetriableError(Exception):
    pass


def fetch_in_background(
    provider: OAuthTokenProvider, done: Callable[[OAuthToken | None, Exception | None], None]
) -> None:
    """Call ``provider.token()`` on a daemon thread and pass the outcome to ``done``."""

    def run() -> None:
        try:
            token = provider.token()
        except Exception as exc:  # reported to the connection, which fails cleanly
            done(None, exc)
            return
        done(token, None)

    threading.Thread(target=run, name="kafka-share-oauth-token", daemon=True).start()
