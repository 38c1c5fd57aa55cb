"""The OIDC client-credentials token fetch against local endpoints that misbehave:
redirects, clear-text URLs, huge answers and answers that never end."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafka_share.credentials import MAX_TOKEN_RESPONSE_BYTES, ClientCredentialsTokenProvider
from kafka_share.errors import AuthenticationError, ConfigError

Respond = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def endpoint(respond: Respond) -> Iterator[tuple[str, list[str]]]:
    """A local http:// endpoint answering every POST with ``respond``; yields its
    URL and the paths it was asked for."""
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            paths.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            respond(self)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", paths
    finally:
        server.shutdown()
        server.server_close()


def provider(url: str, **kw: Any) -> ClientCredentialsTokenProvider:
    kw.setdefault("max_attempts", 1)
    return ClientCredentialsTokenProvider(url, client_id="app", client_secret="s3cret",
                                          allow_http=True, **kw)


def json_answer(document: object) -> Respond:
    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        body = json.dumps(document).encode()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return respond


def test_an_http_endpoint_is_refused_unless_allowed() -> None:
    with pytest.raises(ConfigError, match=r"http://.*clear text.*token\.endpoint\.allow\.http"):
        ClientCredentialsTokenProvider("http://idp.example/token", client_id="a",
                                       client_secret="s")
    with pytest.raises(ConfigError, match="must be an https:// URL"):
        ClientCredentialsTokenProvider("ftp://idp.example/token", client_id="a",
                                       client_secret="s")


def test_a_token_is_fetched() -> None:
    with endpoint(json_answer({"access_token": "abc", "expires_in": 60})) as (url, paths):
        token = provider(url).token()
    assert token.value == "abc" and paths == ["/token"]


def test_a_redirect_is_refused_not_followed() -> None:
    def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "http://elsewhere.example/steal")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with (endpoint(redirect) as (url, paths),
          pytest.raises(AuthenticationError, match=r"HTTP 302.*elsewhere\.example/steal")):
        provider(url).token()
    assert paths == ["/token"]  # asked once, and nothing went to the new location


def test_an_answer_larger_than_the_bound_is_refused() -> None:
    big = {"access_token": "x" * (MAX_TOKEN_RESPONSE_BYTES + 10)}
    with (endpoint(json_answer(big)) as (url, _),
          pytest.raises(AuthenticationError, match="more than 1048576 bytes")):
        provider(url).token()


def test_an_answer_that_never_ends_times_out_at_the_deadline() -> None:
    stop = threading.Event()

    def drip(h: http.server.BaseHTTPRequestHandler) -> None:
        # Headers, then a byte every 0.1 s: each read succeeds well within a
        # per-read socket timeout, so only a deadline for the whole fetch ends it.
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        while not stop.is_set():
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)

    try:
        with endpoint(drip) as (url, _):
            started = time.monotonic()
            with pytest.raises(AuthenticationError, match=r"no complete answer within 1 s"):
                provider(url, timeout_s=1.0).token()
            assert time.monotonic() - started < 3.0
    finally:
        stop.set()


def test_a_server_error_is_retried_then_reported() -> None:
    def fail(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(503)
        h.send_header("Content-Length", "0")
        h.end_headers()

    with (endpoint(fail) as (url, paths),
          pytest.raises(AuthenticationError, match=r"after 3 attempts: HTTP 503")):
        provider(url, max_attempts=3, retry_backoff_ms=1).token()
    assert len(paths) == 3


# -- when tokens are refreshed (sasl.login.refresh.*, as Java) -------------------------


def test_the_refresh_falls_at_the_window_factor_of_the_lifetime() -> None:
    from kafka_share.credentials import TokenRefreshPolicy

    policy = TokenRefreshPolicy()  # 0.8 + up to 0.05, min period 60 s, buffer 300 s
    hour = 3600.0
    assert policy.refresh_at_s(1000, 1000, 1000 + hour, draw=0.0) == pytest.approx(
        1000 + 0.8 * hour)
    assert policy.refresh_at_s(1000, 1000, 1000 + hour, draw=1.0) == pytest.approx(
        1000 + 0.85 * hour)
    # Not later than the buffer before the expiry ...
    late = TokenRefreshPolicy(window_factor=1.0, window_jitter=0.0)
    assert late.refresh_at_s(1000, 1000, 1000 + hour, draw=0.5) == 1000 + hour - 300
    # ... nor sooner than the minimum period from now (a token issued long ago).
    assert policy.refresh_at_s(5000, 0, 5000 + 1000, draw=0.0) == 5000 + 60
    # Too short-lived for both margins: that fraction of what is left.
    assert policy.refresh_at_s(1000, 1000, 1000 + 200, draw=0.0) == pytest.approx(1000 + 0.8 * 200)


def test_the_token_source_follows_the_configured_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_share._net import security
    from kafka_share.config import parse_config
    from kafka_share.credentials import OAuthToken, TokenRefreshPolicy

    config = parse_config({
        "bootstrap.servers": "localhost:9092", "group.id": "g",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.refresh.window.factor": "0.5", "sasl.login.refresh.window.jitter": 0,
        "sasl.login.refresh.min.period.seconds": 30, "sasl.login.refresh.buffer.seconds": 10,
    }, sasl_oauth_token_provider=lambda: "opaque")
    configured = security.security_from_config(config).token_source
    assert configured is not None
    assert configured.refresh == TokenRefreshPolicy(0.5, 0.0, 30, 10)

    now = [10_000.0]
    fetched: list[float] = []

    def provider() -> OAuthToken:
        fetched.append(now[0])
        return OAuthToken(f"t{len(fetched)}", int((now[0] + 3600) * 1000))

    pending: list[Any] = []
    monkeypatch.setattr(security, "fetch_in_background",
                        lambda p, done: pending.append((p, done)))

    def fetches_done() -> None:  # what the helper thread does
        while pending:
            p, done = pending.pop()
            done(p.token(), None)

    source = security.TokenSource(security.as_token_provider(provider),
                                  TokenRefreshPolicy(0.5, 0.0), clock=lambda: now[0])
    assert source.current() is None  # being fetched
    fetches_done()
    assert source.current() is not None and len(fetched) == 1
    now[0] += 1799  # just under half of the hour
    assert source.current() is not None and not pending
    now[0] += 2
    assert source.current() is not None  # the old one still works meanwhile
    fetches_done()
    assert len(fetched) == 2


@pytest.mark.parametrize("key, value", [
    ("sasl.login.refresh.window.factor", "0.4"), ("sasl.login.refresh.window.jitter", "0.3"),
    ("sasl.login.refresh.min.period.seconds", "901"), ("sasl.login.refresh.buffer.seconds", "-1"),
    ("sasl.login.refresh.window.factor", "nan"), ("sasl.login.refresh.window.factor", "soon"),
])
def test_refresh_settings_out_of_range_are_refused(key: str, value: str) -> None:
    from kafka_share.config import parse_config

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config({"bootstrap.servers": "localhost:9092", "group.id": "g", key: value})
