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
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from kafka_share._reprs import attrs_repr
from kafka_share.errors import AuthenticationError, ConfigError

if TYPE_CHECKING:
    import http.client

__all__ = [
    "ClientCredentialsTokenProvider",
    "OAuthToken",
    "OAuthTokenProvider",
    "TokenRefreshPolicy",
    "as_token_provider",
    "jwt_claims",
]

log = logging.getLogger("kafka_share.credentials")


def _hide(_: object) -> str:
    return "'[hidden]'"


@attrs_repr
@attrs.frozen(repr=False)
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
    client authentication, form-encoded. With ``cache`` (the default) it keeps
    the access token until ``refresh`` (:class:`TokenRefreshPolicy`, Java's
    ``sasl.login.refresh.*`` rule) says to fetch a new one; its lifetime comes
    from the JWT's ``exp`` or else the response's ``expires_in``. (A consumer
    passes ``cache=False``: its connections share one cache of their own.)
    Failures other than HTTP 4xx are retried with exponential backoff
    (``retry_backoff_ms`` up to ``retry_backoff_max_ms``: Java's
    ``sasl.login.retry.backoff.*``) within one call.

    The request carries the client secret, so: the endpoint must be https://
    (``allow_http`` for a local test endpoint), a redirect is refused rather
    than followed (it would send the secret to another location), the answer
    may hold at most :data:`MAX_TOKEN_RESPONSE_BYTES`, and each attempt ends
    within ``timeout_s`` however slowly the endpoint answers.
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
        allow_http: bool = False,
        refresh: TokenRefreshPolicy | None = None,
        cache: bool = True,
    ) -> None:
        url = urllib.parse.urlsplit(token_endpoint_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ConfigError(
                "sasl.oauthbearer.token.endpoint.url must be an https:// URL, got "
                f"{token_endpoint_url!r}"
            )
        if url.scheme == "http" and not allow_http:
            raise ConfigError(
                f"sasl.oauthbearer.token.endpoint.url {token_endpoint_url!r} is http://: the "
                "client secret would travel in clear text. Use https://, or set "
                "sasl.oauthbearer.token.endpoint.allow.http=true for a local test endpoint"
            )
        self.token_endpoint_url = token_endpoint_url
        self._url = url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.extensions = dict(extensions or {})
        self._ssl_context = ssl_context
        self._timeout_s = timeout_s
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._max_attempts = max_attempts
        self._refresh = refresh or TokenRefreshPolicy()
        self._cache = cache
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
            if self._cache and self._cached is not None and now < self._refresh_at_s:
                return self._cached
            token = self._fetch_with_retries()
            self._cached = token
            self._refresh_at_s = refresh_at_s(self._refresh, token, now, now)
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
        headers = {
            "Accept": "application/json",
            "Authorization": f"Basic {basic}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Cache-Control": "no-cache",
        }
        body = self._post(urllib.parse.urlencode(form).encode(), headers)
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

    def _post(self, form: bytes, headers: Mapping[str, str]) -> bytes:
        """One POST to the endpoint, over by ``timeout_s`` whatever the endpoint
        does (a per-read socket timeout alone lets an endpoint that sends a
        byte now and then hold the call forever): a timer shuts the socket down
        at the deadline."""
        # Imported here: http.client pulls in the email package (about 5 ms and
        # 2 MB), which a client that never fetches a token should not pay for.
        import http.client  # noqa: PLC0415

        url = self._url
        connection: http.client.HTTPConnection
        if url.scheme == "https":
            connection = http.client.HTTPSConnection(
                url.hostname or "", url.port, timeout=self._timeout_s,
                context=self._ssl_context or ssl.create_default_context(),
            )
        else:
            connection = http.client.HTTPConnection(
                url.hostname or "", url.port, timeout=self._timeout_s
            )
        expired = threading.Event()
        #: the socket once connected (the response keeps reading from it after
        #: the connection hands it over and forgets it)
        sockets: list[socket.socket] = []

        def expire() -> None:
            expired.set()
            for sock in [connection.sock, *sockets]:
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        timer = threading.Timer(self._timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
            connection.connect()
            sockets.append(connection.sock)
            if expired.is_set():
                expire()  # the deadline passed while connecting
            connection.request("POST", path, body=form, headers=dict(headers))
            response = connection.getresponse()
            self._check_status(response)
            body = response.read(MAX_TOKEN_RESPONSE_BYTES + 1)
            if expired.is_set() or (response.length and len(body) <= MAX_TOKEN_RESPONSE_BYTES):
                # read(n) returns what came before the socket closed, short
                raise http.client.IncompleteRead(body, response.length)
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise _RetriableError(
                    f"no complete answer within {self._timeout_s:g} s"
                ) from None
            raise _RetriableError(str(exc) or type(exc).__name__) from None
        finally:
            timer.cancel()
            connection.close()
        if len(body) > MAX_TOKEN_RESPONSE_BYTES:
            raise AuthenticationError(
                f"the token endpoint {self.token_endpoint_url} answered with more than "
                f"{MAX_TOKEN_RESPONSE_BYTES} bytes; refusing it"
            )
        return body

    def _check_status(self, response: http.client.HTTPResponse) -> None:
        status = response.status
        if 300 <= status < 400:
            raise AuthenticationError(
                f"the token endpoint {self.token_endpoint_url} redirected (HTTP {status} "
                f"{response.reason}, Location: {response.getheader('Location')!r}); redirects "
                "are not followed, since the request carries the client secret: set "
                "sasl.oauthbearer.token.endpoint.url to the final URL"
            )
        if 400 <= status < 500:
            raise AuthenticationError(
                f"the token endpoint {self.token_endpoint_url} refused the client "
                f"credentials of client id {self.client_id!r}: HTTP {status} {response.reason}"
            )
        if not 200 <= status < 300:
            raise _RetriableError(f"HTTP {status} {response.reason}")


#: The most a token response may hold (a JWT is a few KB).
MAX_TOKEN_RESPONSE_BYTES = 1 << 20


@attrs_repr
@attrs.frozen(repr=False)
class TokenRefreshPolicy:
    """When to fetch a new OAUTHBEARER token: Java's login refresh rule
    (``sasl.login.refresh.*``), pure (the caller passes the time and the random
    draw).

    The refresh falls at ``window_factor`` (+ up to ``window_jitter``) of the
    token's lifetime, from its start (the JWT's ``iat``, else when it was
    fetched) to its expiry; but no later than ``buffer_s`` before the expiry and
    no sooner than ``min_period_s`` from now. A token too short-lived for both
    margins is refreshed at that fraction of what is left of it.
    """

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_s: float = 60.0
    buffer_s: float = 300.0

    def refresh_at_s(self, now_s: float, start_s: float, expire_s: float, draw: float) -> float:
        """When to refresh a token valid from ``start_s`` to ``expire_s``, seen
        at ``now_s``; ``draw`` is a uniform random number in [0, 1)."""
        pct = self.window_factor + self.window_jitter * draw
        if now_s + self.min_period_s + self.buffer_s > expire_s:
            return now_s + max(0.0, expire_s - now_s) * pct
        proposed = start_s + (expire_s - start_s) * pct
        if proposed > expire_s - self.buffer_s:
            return expire_s - self.buffer_s
        return max(proposed, now_s + self.min_period_s)


def refresh_at_s(
    policy: TokenRefreshPolicy, token: OAuthToken, fetched_at_s: float, now_s: float
) -> float:
    """When to replace ``token`` (fetched at ``fetched_at_s``): ``policy`` over its
    lifetime from its JWT ``iat`` (else the fetch) to its expiry; a token that
    says nothing of its expiry is asked for again after ``min_period_s`` (at
    least a second)."""
    if token.expires_at_ms is None:
        return now_s + max(1.0, policy.min_period_s)
    iat = jwt_claims(token.value).get("iat")
    start_s = float(iat) if isinstance(iat, int | float) and iat <= now_s else fetched_at_s
    return policy.refresh_at_s(now_s, start_s, token.expires_at_ms / 1000, random.random())


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
