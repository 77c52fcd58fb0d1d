"""The search backends, each on its real API shape (served by the local fake), and what a
user is told when one fails."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks.webserver import KEY, PageServer
from talaria.tools.errors import WebError
from talaria.tools.web import remote
from talaria.tools.web.search import search
from talaria.tools.web.settings import web_settings

KEYS = {"BRAVE_API_KEY": KEY, "TAVILY_API_KEY": KEY, "EXA_API_KEY": KEY, "FIRECRAWL_API_KEY": KEY}


def settings_for(backend: str, web: PageServer, tmp_path: Path, env: dict[str, str] = KEYS,
                 extract: str | None = None):
    base = web.url(f"/{backend}")
    settings, problems = web_settings(search=backend, extract=extract, endpoint=base, allow=(),
                                      env=env, cache_dir=tmp_path, cache_ttl=60)
    assert settings is not None, problems
    return settings


@pytest.mark.parametrize("backend", ["searxng", "brave", "tavily", "exa", "firecrawl"])
def test_every_backend_gives_title_url_description(backend: str, web: PageServer, tmp_path: Path) -> None:
    hits = anyio.run(search, settings_for(backend, web, tmp_path), "rust async", 3)
    assert [h.as_dict() for h in hits] == [
        {"title": "Result 1: /article", "url": web.url("/article"), "description": "Snippet about /article"},
        {"title": "Result 2: /doc.pdf", "url": web.url("/doc.pdf"), "description": "Snippet about /doc.pdf"},
        {"title": "Result 3: /redirect/2", "url": web.url("/redirect/2"),
         "description": "Snippet about /redirect/2"},
    ]
    request = web.requests[-1]
    if backend == "searxng":
        assert request["query"] == {"q": ["rust async"], "format": ["json"]}
    elif backend == "brave":
        assert request["headers"]["X-Subscription-Token"] == KEY and request["query"]["count"] == ["3"]


def test_a_refused_key_says_which_variable(web: PageServer, tmp_path: Path) -> None:
    settings = settings_for("brave", web, tmp_path, env={"BRAVE_API_KEY": "wrong"})
    with pytest.raises(WebError, match=r"brave refused the request \(HTTP 401\): check BRAVE_API_KEY"):
        anyio.run(search, settings, "x", 3)


def test_searxng_without_its_json_format_says_how_to_enable_it(web: PageServer, tmp_path: Path) -> None:
    import httpx2

    from talaria.tools.web.search import call_api

    async def without_format() -> None:  # what a stock SearXNG answers: 403
        async with httpx2.AsyncClient() as client:
            await call_api(client, "searxng", "GET", web.url("/searxng/search"), params={"q": "x"})

    with pytest.raises(WebError, match="enable the JSON format in its settings.yml"):
        anyio.run(without_format)


def test_an_unreachable_backend_is_a_clear_error(tmp_path: Path) -> None:
    settings, _ = web_settings(search="searxng", extract=None, endpoint="http://127.0.0.1:9",
                               allow=(), env={}, cache_dir=tmp_path, cache_ttl=60)
    assert settings is not None
    with pytest.raises(WebError, match="cannot reach searxng at http://127.0.0.1:9/search"):
        anyio.run(search, settings, "x", 3)


def test_missing_keys_turn_the_tool_off_with_one_line(tmp_path: Path) -> None:
    settings, problems = web_settings(search="tavily", extract=None, endpoint=None, allow=(),
                                      env={}, cache_dir=tmp_path, cache_ttl=60)
    assert settings is None and problems == ["web_search = tavily needs an API key in TAVILY_API_KEY"]
    settings, problems = web_settings(search="searxng", extract=None, endpoint=None, allow=(),
                                      env={"SEARXNG_URL": "http://search.lan"}, cache_dir=tmp_path,
                                      cache_ttl=60)
    assert settings is not None and settings.endpoint == "http://search.lan" and not problems
    settings, problems = web_settings(search=None, extract="firecrawl", endpoint=None, allow=(),
                                      env={}, cache_dir=tmp_path, cache_ttl=60)
    assert settings is not None and settings.extract == "local" and settings.tools() == ("web_extract",)
    assert "FIRECRAWL_API_KEY" in problems[0]


def test_firecrawl_and_tavily_read_pages_for_us(web: PageServer, tmp_path: Path) -> None:
    urls = ["https://example.com/a", "https://example.com/b"]
    crawled = anyio.run(remote.extract, settings_for("firecrawl", web, tmp_path, extract="firecrawl"), urls)
    assert crawled[urls[0]].text == "# Scraped\n\nhttps://example.com/a"
    tavily = anyio.run(remote.extract, settings_for("tavily", web, tmp_path, extract="tavily"), urls)
    assert tavily[urls[0]].text == "raw https://example.com/a"
    assert str(tavily[urls[1]]) == "tavily could not read it: blocked by robots"
