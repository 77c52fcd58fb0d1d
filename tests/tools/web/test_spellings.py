"""Every spelling of a host reaches the guard as the address it is: decimal, octal, hex,
short IPv4 forms, bracketed IPv6 (mapped, compatible, NAT64, zone ids), trailing dots; in a
first URL and in a redirect (issue 23, item 10)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.webserver import PageServer
from talaria.tools.web.guard import BlockedURL, Policy
from talaria.tools.web.pages import WebState, extract_pages
from talaria.tools.web.settings import web_settings
from tests.tools.web.test_addresses import IANA_IPV4

LOOPBACK = "127.0.0.1"
METADATA = "169.254.169.254"


def v4_spellings(v4: str) -> dict[str, str]:
    """Host spellings the C resolver (inet_aton) reads as `v4`."""
    n = int(ipaddress.IPv4Address(v4))
    o = [int(part) for part in v4.split(".")]
    return {
        "dotted": v4, "decimal": str(n), "hex": f"0x{n:x}", "HEX": f"0X{n:X}",
        "octal": f"0{n:o}", "dotted hex": ".".join(f"0x{x:x}" for x in o),
        "dotted octal": ".".join(f"0{x:o}" for x in o),
        "a.b.c": f"{o[0]}.{o[1]}.{o[2] << 8 | o[3]}", "a.b": f"{o[0]}.{n & 0xFFFFFF}",
        "mixed": f"0x{o[0]:x}.{o[1]}.0{o[2]:o}.{o[3]}",
    }


def url_spellings(v4: str) -> dict[str, str]:
    """`v4_spellings` that httpx lets through to the resolver (it refuses an all-digit
    dotted form that is not plain IPv4 itself: a malformed URL)."""
    return {form: host for form, host in v4_spellings(v4).items() if form != "dotted octal"}


def v6_spellings(v4: str) -> dict[str, str]:
    """Bracketed IPv6 hosts that are, or carry, `v4`."""
    n = int(ipaddress.IPv4Address(v4))
    a, b = n >> 16, n & 0xFFFF
    return {"mapped": f"[::ffff:{v4}]", "mapped hex": f"[::FFFF:{a:X}:{b:X}]",
            "mapped long": f"[0:0:0:0:0:ffff:{v4}]", "compatible": f"[::{v4}]",
            "nat64": f"[64:ff9b::{v4}]", "6to4": f"[2002:{a:x}:{b:x}::]"}


def state(tmp_path: Path, *allow: str) -> WebState:
    settings_, problems = web_settings(search=None, extract="local", endpoint=None, allow=allow,
                                       env={}, cache_dir=tmp_path / "web", cache_ttl=0)
    assert settings_ is not None and not problems
    return WebState(settings_)


def resolve(host: str) -> list[str]:
    return anyio.run(Policy().resolve, host, 80)


@pytest.mark.parametrize("target", [LOOPBACK, METADATA, "10.0.0.1", "0.0.0.0", "192.168.1.1"])
def test_every_numeric_spelling_resolves_to_the_address_and_is_refused(target: str) -> None:
    for form, host in v4_spellings(target).items():
        with pytest.raises(BlockedURL, match=f"resolves to {target}, which is"):
            resolve(host)
        # Allowed, the same spelling resolves to the address itself: it is a real spelling.
        assert anyio.run(Policy((ipaddress.ip_network(target),)).resolve, host, 80) == [target], form


blocked_v4 = st.sampled_from([row[0] for row in IANA_IPV4]).flatmap(
    lambda cidr: st.integers(0, ipaddress.ip_network(cidr).num_addresses - 1).map(
        lambda i, cidr=cidr: str(ipaddress.ip_network(cidr)[i])))


@settings(max_examples=60)
@given(blocked_v4, st.sampled_from(sorted(v4_spellings("1.2.3.4"))))
def test_generated_spellings_of_special_addresses_are_refused(v4: str, form: str) -> None:
    host = v4_spellings(v4)[form]
    with pytest.raises(BlockedURL, match="not a public address|cannot resolve"):
        resolve(host)


@settings(max_examples=40)
@given(blocked_v4, st.sampled_from(sorted(v6_spellings("1.2.3.4"))))
def test_generated_ipv6_forms_of_special_addresses_are_refused(v4: str, form: str) -> None:
    host = v6_spellings(v4)[form].strip("[]")
    with pytest.raises(BlockedURL, match=f"{v4}: .*not a public address"):
        resolve(host)


def test_every_spelling_in_a_url_is_refused_before_connecting(tmp_path: Path) -> None:
    """Through web_extract's whole path (URL parsing by httpx too): nothing reaches the
    loopback server; with loopback allowed, the same spellings do reach it (they are real)."""
    with PageServer() as web:
        # Reached when allowed: IPv4 spellings (a mapped IPv6 one needs an IPv6 stack, and
        # localhost may resolve to ::1 too, which 127.0.0.0/8 does not allow).
        reachable = url_spellings(LOOPBACK)
        odd = {**v6_spellings(LOOPBACK), "name": "LocalHost", "trailing dot": "127.0.0.1.", "name dot": "localhost.",
               "padded": "127.000.000.001", "zone": "[fe80::1%25lo]", "unspecified": "[::]",
               "zero": "0", "percent": "%31%32%37.0.0.1", "upper": "[::FFFF:7F00:0001]",
               "dotted octal": v4_spellings(LOOPBACK)["dotted octal"]}
        spellings = {**reachable, **odd}
        urls = [f"http://{host}:{web.port}/article" for host in spellings.values()]
        results = anyio.run(extract_pages, state(tmp_path), urls)
        for (form, host), result in zip(spellings.items(), results, strict=True):
            assert result["content"] == "" and result["error"], (form, host)
            if form in reachable:
                assert "which is loopback" in result["error"], (form, result["error"])
            if form in v6_spellings(LOOPBACK):  # judged by the IPv4 address inside
                assert "127.0.0.1: loopback" in result["error"], (form, result["error"])
        assert web.hits["/article"] == 0
        allowed = anyio.run(extract_pages, state(tmp_path, "127.0.0.0/8"),
                            [f"http://{h}:{web.port}/article" for h in reachable.values()])
        assert all("Tokio" in r["content"] for r in allowed), allowed
        assert web.hits["/article"] == len(reachable)


def test_a_redirect_to_any_spelling_is_checked_again(tmp_path: Path) -> None:
    """Only 127.0.0.1 is allowed: the first hop is fetched, none of the redirects is."""
    with PageServer() as web:
        targets = [*url_spellings(METADATA).values(), *v6_spellings(METADATA).values(),
                   *url_spellings("127.0.0.2").values(), "[::127.0.0.1]", "[64:ff9b::7f00:2]"]
        for i, host in enumerate(targets):
            web.redirects[f"/hop{i}"] = f"http://{host}:{web.port}/article"
        results = anyio.run(extract_pages, state(tmp_path, "127.0.0.1/32"),
                            [web.url(f"/hop{i}") for i in range(len(targets))])
        for host, result in zip(targets, results, strict=True):
            assert result["content"] == "", host
            assert "not a public address" in result["error"], (host, result["error"])
        assert web.hits["/article"] == 0
        assert all(web.hits[f"/hop{i}"] == 1 for i in range(len(targets)))
