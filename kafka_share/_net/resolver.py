"""Broker name resolution that never blocks the network thread.

``getaddrinfo`` can take seconds (a slow or unreachable DNS server) and cannot
be interrupted; run on the network thread it would stall heartbeats long
enough to be fenced from the group. So a host name is resolved on a short-lived
daemon thread, and the network thread is woken when the answer is in. IP
literals (by far the common case on a laptop, in tests and in containers) are
parsed at once without a thread.

``client.dns.lookup`` (Java's names):

* ``use_all_dns_ips`` (default): every address of the name is returned, and
  the connection tries them in order until one answers;
* ``resolve_canonical_bootstrap_servers_only``: a bootstrap server's name is
  first resolved to its addresses, and each address back to its canonical host
  name (as Java does, for Kerberos principals); the canonical names are then
  resolved like any other.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from kafka_share.errors import NetworkError

__all__ = ["AddressInfo", "Resolver"]

#: ``(family, type, proto, canonname, sockaddr)`` as ``socket.getaddrinfo`` returns.
AddressInfo = tuple[Any, Any, int, str, Any]

_PENDING = object()


def _getaddrinfo(host: str, port: int, flags: int = 0) -> list[AddressInfo]:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=flags)


class Resolver:
    """Resolves ``(host, port)`` off the network thread; :meth:`lookup` polls.

    Args:
        wakeup: called (from the resolving thread) when an answer is ready.
        dns_lookup: ``client.dns.lookup``.
        getaddrinfo: injectable for tests.
    """

    def __init__(
        self,
        wakeup: Callable[[], None],
        *,
        dns_lookup: str = "use_all_dns_ips",
        getaddrinfo: Callable[[str, int], list[AddressInfo]] | None = None,
    ) -> None:
        self._wakeup = wakeup
        self._canonical_bootstrap = dns_lookup == "resolve_canonical_bootstrap_servers_only"
        self._getaddrinfo = getaddrinfo or _getaddrinfo
        self._lock = threading.Lock()
        #: (host, port, bootstrap) -> _PENDING, a result list, or the NetworkError
        self._answers: dict[tuple[str, int, bool], object] = {}

    def lookup(self, host: str, port: int, *, bootstrap: bool = False) -> list[AddressInfo] | None:
        """The addresses of ``host:port``; None while the lookup is under way (the
        wakeup callback fires when it is done). Each call after an answer starts
        afresh, so a reconnect sees DNS changes.

        Raises:
            NetworkError: the name cannot be resolved.
        """
        try:
            return _getaddrinfo(host, port, socket.AI_NUMERICHOST)
        except (OSError, UnicodeError):
            pass  # a name, not an IP literal
        key = (host, port, bootstrap and self._canonical_bootstrap)
        with self._lock:
            answer = self._answers.get(key)
            if answer is _PENDING:
                return None
            if answer is None:
                self._answers[key] = _PENDING
                threading.Thread(
                    target=self._resolve, args=(key,), name=f"kafka-share-dns-{host}",
                    daemon=True,
                ).start()
                return None
            del self._answers[key]
        if isinstance(answer, NetworkError):
            raise answer
        assert isinstance(answer, list)
        return answer

    def _resolve(self, key: tuple[str, int, bool]) -> None:
        host, port, canonical = key
        answer: object
        try:
            if canonical:
                names: list[str] = []
                for info in self._getaddrinfo(host, port):
                    name = socket.getfqdn(info[4][0])
                    if name not in names:
                        names.append(name)
                answer = [i for name in names for i in self._getaddrinfo(name, port)]
            else:
                answer = self._getaddrinfo(host, port)
            if not answer:
                answer = NetworkError(f"broker {host}:{port}: the name has no addresses")
        except (OSError, UnicodeError) as exc:
            answer = NetworkError(f"cannot resolve broker {host}:{port}: {exc}")
        with self._lock:
            self._answers[key] = answer
        self._wakeup()
