"""What an address is, whatever its spelling: every IANA special-purpose block, every IPv6
form that carries an IPv4 address, checked against the guard's tables (issue 23, item 10)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from talaria.tools.web.addresses import embedded, refusal
from talaria.tools.web.guard import address_allowed, parse_networks

# The IANA IPv4 and IPv6 Special-Purpose Address Registries (2025), every entry, with its
# "globally reachable" column and what the guard does. Entries marked reachable are refused
# too where they serve no web page (anycast services, DNS sinks, relays, identifiers).
IANA_IPV4 = [
    # network, RFC, globally reachable per IANA
    ("0.0.0.0/8", "RFC 791", False),
    ("0.0.0.0/32", "RFC 1122", False),
    ("10.0.0.0/8", "RFC 1918", False),
    ("100.64.0.0/10", "RFC 6598", False),
    ("127.0.0.0/8", "RFC 1122", False),
    ("169.254.0.0/16", "RFC 3927", False),
    ("172.16.0.0/12", "RFC 1918", False),
    ("192.0.0.0/24", "RFC 6890", False),
    ("192.0.0.0/29", "RFC 7335", False),
    ("192.0.0.8/32", "RFC 7600", False),
    ("192.0.0.9/32", "RFC 7723", True),     # PCP anycast: not a web server
    ("192.0.0.10/32", "RFC 8155", True),    # TURN anycast: not a web server
    ("192.0.0.170/31", "RFC 8880", False),  # NAT64/DNS64 discovery
    ("192.0.2.0/24", "RFC 5737", False),
    ("192.31.196.0/24", "RFC 7535", True),  # AS112-v4: a DNS sink
    ("192.52.193.0/24", "RFC 7450", True),  # AMT relays
    ("192.88.99.0/24", "RFC 7526", False),  # deprecated 6to4 relay anycast
    ("192.88.99.2/32", "RFC 6751", False),  # 6a44 relay anycast
    ("192.168.0.0/16", "RFC 1918", False),
    ("192.175.48.0/24", "RFC 7534", True),  # AS112 direct delegation: a DNS sink
    ("198.18.0.0/15", "RFC 2544", False),
    ("198.51.100.0/24", "RFC 5737", False),
    ("203.0.113.0/24", "RFC 5737", False),
    ("224.0.0.0/4", "RFC 5771", False),     # multicast (not in the registry; never a server)
    ("240.0.0.0/4", "RFC 1112", False),
    ("255.255.255.255/32", "RFC 919", False),
]
IANA_IPV6 = [
    ("::1/128", "RFC 4291", False),
    ("::/128", "RFC 4291", False),
    ("::ffff:0:0/96", "RFC 4291", False),   # judged by the IPv4 address inside
    ("64:ff9b::/96", "RFC 6052", True),     # judged by the IPv4 address inside
    ("64:ff9b:1::/48", "RFC 8215", False),
    ("100::/64", "RFC 6666", False),
    ("100:0:0:1::/64", "RFC 9780", False),
    ("2001::/23", "RFC 2928", False),
    ("2001::/32", "RFC 4380", False),        # Teredo: N/A in the registry
    ("2001:1::1/128", "RFC 7723", True),     # PCP anycast
    ("2001:1::2/128", "RFC 8155", True),     # TURN anycast
    ("2001:1::3/128", "RFC 9665", True),     # DNS-SD SRP anycast
    ("2001:2::/48", "RFC 5180", False),
    ("2001:3::/32", "RFC 7450", True),       # AMT
    ("2001:4:112::/48", "RFC 7535", True),   # AS112-v6
    ("2001:10::/28", "RFC 4843", False),     # deprecated ORCHID
    ("2001:20::/28", "RFC 7343", True),      # ORCHIDv2: identifiers, not routable locators
    ("2001:30::/28", "RFC 9374", True),      # DRIP entity tags: identifiers
    ("2001:db8::/32", "RFC 3849", False),
    ("2002::/16", "RFC 3056", False),        # 6to4: N/A in the registry
    ("2620:4f:8000::/48", "RFC 7534", True),  # AS112 direct delegation
    ("3fff::/20", "RFC 9637", False),
    ("5f00::/16", "RFC 9602", False),
    ("fc00::/7", "RFC 4193", False),
    ("fe80::/10", "RFC 4291", False),
    ("fec0::/10", "RFC 3879", False),        # deprecated site-local (not in the registry)
    ("ff00::/8", "RFC 4291", False),         # multicast (not in the registry)
]
JUDGED_BY_INSIDE = {"::ffff:0:0/96", "64:ff9b::/96"}
PUBLIC_V4 = ["93.184.216.34", "1.1.1.1", "8.8.8.8", "151.101.1.69", "223.255.255.1"]
PUBLIC_V6 = ["2606:4700:4700::1111", "2a00:1450:4001:82a::200e", "2620:fe::fe"]


def samples(cidr: str) -> list[str]:
    """The first, a middle and the last address of a network."""
    net = ipaddress.ip_network(cidr)
    return [str(net[0]), str(net[net.num_addresses // 2]), str(net[-1])]


def wrappers(v4: str) -> dict[str, str]:
    """Every IPv6 spelling of the IPv4 address `v4`."""
    n = int(ipaddress.IPv4Address(v4))
    a, b = n >> 16, n & 0xFFFF
    return {
        "mapped": f"::ffff:{v4}", "mapped hex": f"::ffff:{a:x}:{b:x}",
        "mapped long": f"0:0:0:0:0:FFFF:{v4}", "compatible": f"::{v4}",
        "nat64": f"64:ff9b::{v4}", "nat64 hex": f"64:ff9b::{a:x}:{b:x}",
        "nat64 local /48": f"64:ff9b:1:{a:x}:{b >> 8:x}:{(b & 0xFF) << 8:x}::1",
        "6to4": f"2002:{a:x}:{b:x}::1",
        "teredo server": f"2001:0:{a:x}:{b:x}:8000:63bf:3fff:fdd2",
        "teredo client": f"2001:0:4136:e378:8000:63bf:{a ^ 0xFFFF:x}:{b ^ 0xFFFF:x}",
        "isatap": f"2606:4700:1::5efe:{v4}", "isatap global": f"2606:4700:1:0:200:5efe:{v4}",
    }


@pytest.mark.parametrize(("cidr", "rfc", "reachable"), IANA_IPV4, ids=[r[0] for r in IANA_IPV4])
def test_every_ipv4_special_purpose_block_is_refused_in_every_form(cidr, rfc, reachable) -> None:
    for v4 in samples(cidr):
        assert refusal(ipaddress.ip_address(v4)), v4
        for form, v6 in wrappers(v4).items():
            why = refusal(ipaddress.ip_address(v6))
            assert why and v4 in why, (form, v6, why)  # the reason names the address inside


@pytest.mark.parametrize(("cidr", "rfc", "reachable"), IANA_IPV6, ids=[r[0] for r in IANA_IPV6])
def test_every_ipv6_special_purpose_block_is_refused(cidr, rfc, reachable) -> None:
    for v6 in samples(cidr):
        ip = ipaddress.ip_address(v6)
        if cidr in JUDGED_BY_INSIDE:  # they are the IPv4 address they carry
            (form, inner), = embedded(ip)
            assert (refusal(ip) is None) == (refusal(inner) is None), v6
        else:
            assert refusal(ip), v6


def test_the_forms_the_issue_names() -> None:
    for text in ("::127.0.0.1", "::169.254.169.254", "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe",
                 "64:ff9b::10.0.0.1", "::ffff:169.254.169.254"):
        assert not address_allowed(ipaddress.ip_address(text)), text


@pytest.mark.parametrize("v4", PUBLIC_V4)
def test_public_addresses_pass_in_the_forms_that_are_them(v4: str) -> None:
    assert address_allowed(ipaddress.ip_address(v4))
    forms = wrappers(v4)
    for form in ("mapped", "mapped hex", "nat64", "nat64 hex", "isatap", "isatap global"):
        assert address_allowed(ipaddress.ip_address(forms[form])), form
    # Tunnels and deprecated forms are refused whatever they carry.
    for form in ("compatible", "nat64 local /48", "6to4", "teredo server", "teredo client"):
        assert not address_allowed(ipaddress.ip_address(forms[form])), form


@pytest.mark.parametrize("v6", PUBLIC_V6)
def test_public_ipv6_passes(v6: str) -> None:
    assert address_allowed(ipaddress.ip_address(v6))


def test_outside_global_unicast_is_refused() -> None:
    for text in ("::2:0:0:1", "100::1:0:0:0:1", "400::1", "1fff:ffff::1", "4000::1", "e000::1"):
        assert refusal(ipaddress.ip_address(text)), text


def test_embedded_addresses_agree_with_the_rfcs() -> None:
    """Teredo and 6to4 as Python reads them; NAT64 /48 as RFC 6052 section 2.4 spells it."""
    teredo = ipaddress.IPv6Address("2001:0:4136:e378:8000:63bf:3fff:fdd2")  # RFC 4380's example
    assert teredo.teredo is not None
    assert dict(embedded(teredo)) == {"Teredo server": teredo.teredo[0],
                                      "Teredo client": teredo.teredo[1]}
    assert embedded(ipaddress.IPv6Address("2002:c000:221::1")) == \
        [("6to4", ipaddress.IPv4Address("192.0.2.33"))]
    # RFC 6052's table: 192.0.2.33 under 2001:db8:122::/48 is 2001:db8:122:c000:2:2100::
    rfc = int(ipaddress.IPv6Address("2001:db8:122:c000:2:2100::")) & ((1 << 80) - 1)
    local = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b:1::")) | rfc)
    assert embedded(local) == [("local-use NAT64", ipaddress.IPv4Address("192.0.2.33"))]


def test_a_zone_id_does_not_change_what_an_address_is() -> None:
    assert refusal(ipaddress.ip_address("fe80::1%eth0")) == refusal(ipaddress.ip_address("fe80::1"))
    assert refusal(ipaddress.ip_address("2606:4700:4700::1111%1")) is None


def test_allowing_an_ipv6_prefix_does_not_open_the_ipv4_it_carries() -> None:
    nat64 = parse_networks(["64:ff9b::/96", "64:ff9b:1::/48"])
    assert address_allowed(ipaddress.ip_address("64:ff9b::1.1.1.1"), nat64)
    assert not address_allowed(ipaddress.ip_address("64:ff9b::10.0.0.1"), nat64)
    assert address_allowed(ipaddress.ip_address("64:ff9b:1:101:1:100::"), nat64)  # 1.1.1.1
    both = parse_networks(["64:ff9b::/96", "10.0.0.0/8"])
    assert address_allowed(ipaddress.ip_address("64:ff9b::10.0.0.1"), both)


v4_addresses = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)


@given(v4_addresses)
def test_every_form_of_an_ipv4_address_is_judged_like_it(v4: ipaddress.IPv4Address) -> None:
    refused = refusal(v4) is not None
    for form, v6 in wrappers(str(v4)).items():
        ip = ipaddress.IPv6Address(v6)
        assert v4 in [inner for _, inner in embedded(ip)], (form, v6)
        if refused:
            assert refusal(ip) is not None, (form, v6)


@given(st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address))
def test_any_ipv6_address_is_refused_if_what_it_carries_is(ip: ipaddress.IPv6Address) -> None:
    if any(refusal(inner) for _, inner in embedded(ip)):
        assert refusal(ip) is not None
    if ip.ipv4_mapped is not None:
        assert (refusal(ip) is None) == (refusal(ip.ipv4_mapped) is None)
