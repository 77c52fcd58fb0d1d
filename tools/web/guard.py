"""Where web_extract may connect: http(s) URLs whose every address is public (SSRF guard).

A URL the model chose could point at this machine or its network: the cloud metadata service
(169.254.169.254), an admin page on 127.0.0.1, a router on 192.168.0.1. So:

- only `http` and `https`, with a host, no credentials in the URL;
- the host is resolved here, *every* address it resolves to is checked (a name resolving to
  both a public and a private address is refused), and the connection goes to an address
  that was checked: `PinnedBackend` is the HTTP client's network backend, so there is no
  second lookup a DNS-rebinding server could answer differently;
- each redirect is a new URL, checked the same way (see `talaria.tools.web.fetch`);
- no proxy from the environment (a proxy would resolve names itself).

Allowed: public addresses, decided by what an address is whatever its spelling (decimal,
octal, hex, short IPv4 forms are resolved to it; an IPv6 form that carries an IPv4 address is
judged by that address too): `talaria.tools.web.addresses` holds the tables. `allow` widens
that to networks the user names in config (`web_allow_networks`, e.g. `127.0.0.0/8` for a
local test server).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio

from talaria.tools.errors import WebError
from talaria.tools.web.addresses import Address, Network, refusal

SCHEMES = ("http", "https")


class BlockedURL(WebError):
    """A URL web_extract will not fetch: its scheme, its form, or where it points."""


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) from config; ValueError names the bad one."""
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a network (write it like 127.0.0.0/8): {exc}") from None
    return tuple(out)


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL; BlockedURL otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise BlockedURL("empty URL")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise BlockedURL(f"malformed URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise BlockedURL(f"only http and https URLs can be fetched, not {scheme or 'a bare path'!r}")
    if not parts.hostname:
        raise BlockedURL(f"URL without a host: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise BlockedURL("URLs with credentials (user:password@) are not fetched")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def address_allowed(ip: Address, allow: tuple[Network, ...] = ()) -> bool:
    return refusal(ip, allow) is None


@dataclass(frozen=True, slots=True)
class Policy:
    allow: tuple[Network, ...] = ()
    """Networks reachable beyond the public internet (from `web_allow_networks`)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """The host's addresses, every one checked; BlockedURL if any is not allowed."""
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:  # socket.gaierror
            raise BlockedURL(f"cannot resolve {host!r}: {exc.strerror or exc}") from None
        addresses: list[str] = []
        for *_, sockaddr in infos:
            text = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
            if text not in addresses:
                addresses.append(text)
        if not addresses:
            raise BlockedURL(f"{host!r} resolves to no address")
        blocked = [f"{a}, which is {why}" for a in addresses
                   if (why := refusal(ipaddress.ip_address(a), self.allow)) is not None]
        if blocked:
            raise BlockedURL(
                f"{host!r} resolves to {'; '.join(blocked)}: not a public address, not fetched "
                "(allow a network with web_allow_networks in config.toml)")
        return addresses


def pinned_backend(policy: Policy) -> Any:
    """An httpcore network backend that connects only to addresses `policy` allows, looking
    each host up once (see the module docstring)."""
    import httpcore2

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore2.AnyIOBackend()

        async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                              local_address: str | None = None,
                              socket_options: Any = None) -> Any:
            with anyio.fail_after(timeout):
                addresses = await policy.resolve(host, port)
            error: Exception | None = None
            for address in addresses:  # like a browser: the next one when one fails
                try:
                    return await self.inner.connect_tcp(address, port, timeout, local_address,
                                                        socket_options)
                except httpcore2.ConnectError as exc:
                    error = exc
            assert error is not None
            raise error

        async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                      socket_options: Any = None) -> Any:
            raise BlockedURL("unix sockets are not fetched")

        async def sleep(self, seconds: float) -> None:
            await anyio.sleep(seconds)

    return PinnedBackend()


def guarded_client(policy: Policy, *, timeout: float, user_agent: str, tls: Any) -> Any:
    """An httpx client whose every connection goes through `policy`; redirects are left to
    the caller (each hop is checked there), proxies from the environment are ignored.
    `tls`: an `ssl.SSLContext` (reused: building one costs ~20 ms)."""
    import httpcore2
    import httpx2

    transport = httpx2.AsyncHTTPTransport(verify=tls, trust_env=False)
    # httpx takes no network backend; its pool is rebuilt with ours (same settings otherwise).
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=20, max_keepalive_connections=10, keepalive_expiry=5.0,
        network_backend=pinned_backend(policy),
    )
    return httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False,
                              trust_env=False, headers={"User-Agent": user_agent})
