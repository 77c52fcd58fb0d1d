"""What an IP address is, whatever its spelling: the special-purpose blocks it falls in and
the IPv4 addresses an IPv6 form carries.

    refusal(ip, allow)   None when a fetch may go there, else why not ("loopback (RFC 1122)")

Decided from explicit tables, not `ipaddress.is_global`: before Python 3.12.4 that calls
`::127.0.0.1` and `64:ff9b::a9fe:a9fe` global, and no version looks inside NAT64, 6to4,
Teredo or ISATAP addresses (issue 23, item 10).

- IPv4: every entry of IANA's IPv4 special-purpose registry is refused, the globally
  reachable ones too (AS112, AMT, the anycast of 192.0.0.0/24: none serves a web page),
  plus multicast; everything else is public.
- IPv6: only 2000::/3 is allocated as global unicast; outside it only the two forms that
  *are* an IPv4 address (mapped ::ffff:0:0/96, reached by this host's own IPv4 stack, and
  the NAT64 well-known prefix 64:ff9b::/96, what DNS64 hands out on an IPv6-only network)
  are judged by that address alone. Inside it, the registry's entries are refused (all of
  2001::/23: its globally reachable exceptions are anycast services, DNS sinks and
  identifiers such as ORCHIDv2, none a web server; see the table in the tests).
- An IPv6 address that carries IPv4 addresses is also judged by each of them: IPv4-mapped,
  IPv4-compatible (::/96), NAT64 (64:ff9b::/96, and 64:ff9b:1::/48 at RFC 6052's /48
  position), 6to4 (2002::/16), Teredo (2001::/32: its server and its obfuscated client) and
  an ISATAP interface id (::0:5efe:a.b.c.d or ::200:5efe:a.b.c.d under any prefix: a host with
  an ISATAP tunnel sends it straight to that IPv4 address).

`allow` (the user's `web_allow_networks`) lifts a refusal for the addresses it names; an
embedded IPv4 address is judged on its own, so allowing an IPv6 prefix does not open the
private IPv4 addresses it may carry.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _table(rows: Iterable[tuple[str, str]]) -> tuple[tuple[Network, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in rows)


IPV4_BLOCKED = _table([
    ("0.0.0.0/8", "'this network' (RFC 791)"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("100.64.0.0/10", "carrier-grade NAT (RFC 6598)"),
    ("127.0.0.0/8", "loopback (RFC 1122)"),
    ("169.254.0.0/16", "link-local, cloud metadata (RFC 3927)"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
    ("192.0.2.0/24", "documentation (RFC 5737)"),
    ("192.31.196.0/24", "AS112 DNS sink (RFC 7535)"),
    ("192.52.193.0/24", "AMT relay anycast (RFC 7450)"),
    ("192.88.99.0/24", "6to4 relay anycast, deprecated (RFC 7526)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("192.175.48.0/24", "AS112 direct delegation (RFC 7534)"),
    ("198.18.0.0/15", "benchmarking (RFC 2544)"),
    ("198.51.100.0/24", "documentation (RFC 5737)"),
    ("203.0.113.0/24", "documentation (RFC 5737)"),
    ("224.0.0.0/4", "multicast (RFC 5771)"),
    ("240.0.0.0/4", "reserved (RFC 1112)"),
    ("255.255.255.255/32", "limited broadcast (RFC 919)"),
])
IPV6_BLOCKED = _table([
    ("::/128", "unspecified (RFC 4291)"),
    ("::1/128", "loopback (RFC 4291)"),
    ("::/96", "IPv4-compatible, deprecated (RFC 4291)"),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"),
    ("100::/64", "discard-only (RFC 6666)"),
    ("100:0:0:1::/64", "dummy prefix (RFC 9780)"),
    ("2001::/32", "Teredo (RFC 4380)"),
    ("2001::/23", "IETF protocol assignments (RFC 2928)"),
    ("2001:db8::/32", "documentation (RFC 3849)"),
    ("2002::/16", "6to4 (RFC 3056)"),
    ("2620:4f:8000::/48", "AS112 direct delegation (RFC 7534)"),
    ("3fff::/20", "documentation (RFC 9637)"),
    ("5f00::/16", "SRv6 segment identifiers (RFC 9602)"),
    ("fc00::/7", "unique local (RFC 4193)"),
    ("fe80::/10", "link-local (RFC 4291)"),
    ("fec0::/10", "site-local, deprecated (RFC 3879)"),
    ("ff00::/8", "multicast (RFC 4291)"),
])
GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
COMPATIBLE = ipaddress.IPv6Network("::/96")
TEREDO = ipaddress.IPv6Network("2001::/32")
SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
TRANSPARENT = (MAPPED, NAT64)
"""IPv6 forms that are their IPv4 address: judged by it alone."""
ISATAP_IDS = (0x0000_5EFE, 0x0200_5EFE)
"""ISATAP interface ids (RFC 5214): the high 32 bits of the low 64, then the IPv4 address."""


def embedded(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses `ip` carries, each with the form that carries it."""
    value = int(ip)
    v4 = ipaddress.IPv4Address
    if ip in MAPPED:
        return [("IPv4-mapped", v4(value & 0xFFFF_FFFF))]
    if ip in NAT64:
        return [("NAT64", v4(value & 0xFFFF_FFFF))]
    if ip in COMPATIBLE:
        return [("IPv4-compatible", v4(value))]
    if ip in NAT64_LOCAL:  # RFC 6052 /48: 16 bits, the zero "u" octet, 16 bits
        high, low = (value >> 64) & 0xFFFF, (value >> 40) & 0xFFFF
        return [("local-use NAT64", v4(high << 16 | low))]
    if ip in SIXTOFOUR:
        return [("6to4", v4((value >> 80) & 0xFFFF_FFFF))]
    if ip in TEREDO:  # RFC 4380: the server, then the client's address inverted
        return [("Teredo server", v4((value >> 64) & 0xFFFF_FFFF)),
                ("Teredo client", v4(~value & 0xFFFF_FFFF))]
    if (value >> 32) & 0xFFFF_FFFF in ISATAP_IDS:
        return [("ISATAP", v4(value & 0xFFFF_FFFF))]
    return []


def _within(ip: Address, networks: Iterable[Network]) -> bool:
    # `in` does not compare versions: an IPv4 address "is in" some IPv6 networks.
    return any(ip.version == net.version and ip in net for net in networks)


def _block(ip: Address) -> str | None:
    """Why `ip` itself (not what it carries) is refused, or None."""
    table = IPV4_BLOCKED if ip.version == 4 else IPV6_BLOCKED
    for network, why in table:
        if ip in network:
            return why
    if ip.version == 6 and ip not in GLOBAL_UNICAST and not _within(ip, TRANSPARENT):
        return "outside global unicast 2000::/3 (RFC 4291)"
    return None


def refusal(ip: Address, allow: tuple[Network, ...] = ()) -> str | None:
    """None when `ip` may be fetched, else why not, naming the IPv4 address inside if that
    is the reason: "NAT64 of 127.0.0.1: loopback (RFC 1122)"."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        ip = ipaddress.IPv6Address(int(ip))  # the zone picks an interface, not another address
    reasons = []
    if not _within(ip, allow) and not _within(ip, TRANSPARENT) and (why := _block(ip)):
        reasons.append(why)
    if isinstance(ip, ipaddress.IPv6Address):
        for form, inner in embedded(ip):
            if not _within(inner, allow) and (why := _block(inner)):
                reasons.append(f"{form} {inner}: {why}")
    return "; ".join(reasons) or None
