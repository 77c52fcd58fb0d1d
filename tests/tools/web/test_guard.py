"""The SSRF guard: only public http(s) addresses by default, each address and each redirect
checked, a loopback server reachable only when config allows its network."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import anyio
import pytest

from benchmarks.webserver import PageServer
from talaria.tools.web.guard import BlockedURL, Policy, address_allowed, check_url, parse_networks
from talaria.tools.web.pages import WebState, extract_pages
from talaria.tools.web.settings import web_settings


def state(tmp_path: Path, *allow: str) -> WebState:
    settings, problems = web_settings(search=None, extract="local", endpoint=None, allow=allow,
                                      env={}, cache_dir=tmp_path / "web", cache_ttl=60)
    assert settings is not None and not problems
    return WebState(settings)


def extract(st: WebState, *urls: str) -> list[dict]:
    return anyio.run(extract_pages, st, list(urls))


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "javascript:alert(1)",
    "data:text/html,hi", "/relative/path", "http://", "http://user:pw@example.com/",
    "http://[::1", "",
])
def test_urls_that_are_never_fetched(url: str) -> None:
    with pytest.raises(BlockedURL):
        check_url(url)


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "fe80::1", "fc00::1", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1",
    "::ffff:10.1.1.1", "2002:7f00:1::", "192.0.2.1", "198.18.0.1",
])
def test_special_addresses_are_refused_by_default(address: str) -> None:
    assert not address_allowed(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address))


def test_allowed_networks_widen_the_policy_only_where_named() -> None:
    allow = parse_networks(["127.0.0.0/8", "fd00::/8"])
    assert address_allowed(ipaddress.ip_address("127.0.0.1"), allow)
    assert address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"), allow)
    assert address_allowed(ipaddress.ip_address("fd12::1"), allow)
    assert not address_allowed(ipaddress.ip_address("10.0.0.1"), allow)
    assert not address_allowed(ipaddress.ip_address("::1"), allow)  # IPv6 loopback not named
    with pytest.raises(ValueError, match="not a network"):
        parse_networks(["localhost"])


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    with pytest.raises(BlockedURL, match="resolves to .*127.0.0.1"):
        anyio.run(Policy().resolve, "localhost", 80)
    assert "127.0.0.1" in anyio.run(Policy(parse_networks(["127.0.0.0/8", "::1"])).resolve, "localhost", 80)
    # Numeric spellings of loopback resolve to it, and are refused the same way.
    for spelling in ("2130706433", "0x7f000001", "127.1"):
        with pytest.raises(BlockedURL):
            anyio.run(Policy().resolve, spelling, 80)


@pytest.mark.parametrize("answers", [
    ["93.184.216.34", "10.0.0.7"],  # public and private: the private one could be reached
    ["93.184.216.34", "::ffff:169.254.169.254"],  # metadata, spelt as IPv6
    ["fd00::5"],
])
def test_a_name_resolving_to_any_private_address_is_refused(answers: list[str], monkeypatch,
                                                             tmp_path: Path) -> None:
    """DNS that points a public-looking name at this network (or rebinding to it) is refused
    before any connection: every answer is judged, and connections use only judged answers."""
    async def fake_getaddrinfo(host: str, port: int, **kwargs: object) -> list[tuple]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port)) for a in answers]

    monkeypatch.setattr(anyio, "getaddrinfo", fake_getaddrinfo)
    with pytest.raises(BlockedURL, match="not a public address"):
        anyio.run(Policy().resolve, "innocent.example", 80)
    (result,) = extract(state(tmp_path), "http://innocent.example/page")
    assert "innocent.example' resolves to" in result["error"] and result["content"] == ""


def test_loopback_is_blocked_by_default_and_never_contacted(tmp_path: Path) -> None:
    with PageServer() as web:
        direct = web.url("/article")
        by_name = direct.replace("127.0.0.1", "localhost")
        results = extract(state(tmp_path), direct, by_name, f"http://[::1]:{web.port}/article")
        assert all("not a public address" in r["error"] for r in results), results
        assert all(r["content"] == "" for r in results)
        assert web.hits["/article"] == 0  # refused before connecting


def test_a_redirect_is_checked_like_a_new_url(tmp_path: Path) -> None:
    with PageServer() as web:
        st = state(tmp_path, "127.0.0.1/32")  # this server only
        metadata, local, chain = extract(st, web.url("/to-metadata"), web.url("/to-localhost"),
                                         web.url("/redirect/3"))
        assert "169.254.169.254" in metadata["error"]
        assert chain["final_url"] == web.url("/article") and "Tokio" in chain["content"]
        resolved = {info[4][0] for info in socket.getaddrinfo("localhost", web.port)}
        if resolved == {"127.0.0.1"}:
            assert local["final_url"] == web.url("/article").replace("127.0.0.1", "localhost")
        else:  # localhost is also ::1 here, which this policy does not allow: all or nothing
            assert "resolves to" in local["error"]
        assert web.hits["/latest/meta-data/"] == 0


def test_allowing_loopback_reaches_the_local_server(tmp_path: Path) -> None:
    with PageServer() as web:
        (result,) = extract(state(tmp_path, "127.0.0.0/8"), web.url("/article"))
        assert result["title"] == "Rust async runtimes compared"
        assert web.hits["/article"] == 1


def test_config_rejects_a_bad_network(tmp_path: Path) -> None:
    from talaria.agent.config import load_config

    with pytest.raises(ValueError, match="web_allow_networks"):
        load_config(env={"TALARIA_HOME": str(tmp_path), "TALARIA_WEB_ALLOW_NETWORKS": "my-lan"})
