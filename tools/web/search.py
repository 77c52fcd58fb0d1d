"""Search backends behind one function: `await search(settings, query, limit) -> [Hit]`.

Each backend is one small coroutine on the vendor's HTTP API (httpx; their SDKs would add a
dependency each for one request): SearXNG (self-hosted, JSON format), Brave, Tavily, Exa and
Firecrawl. `settings.endpoint` replaces a vendor's address (a proxy, a compatible service, the
tests' fake). Backend addresses come from the user's config, not from the model, so they are
not subject to the SSRF guard (a SearXNG on localhost is the common case).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from talaria.tools.errors import WebError
from talaria.tools.web.settings import KEY_ENV, USER_AGENT, WebSettings

DEFAULT_BASES = {
    "brave": "https://api.search.brave.com",
    "tavily": "https://api.tavily.com",
    "exa": "https://api.exa.ai",
    "firecrawl": "https://api.firecrawl.dev",
}
DESCRIPTION_CHARS = 500


@dataclass(frozen=True, slots=True)
class Hit:
    title: str
    url: str
    description: str

    def as_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "description": self.description}


Backend = Callable[[Any, WebSettings, str, int], Awaitable[list[Hit]]]


def base_url(settings: WebSettings, backend: str) -> str:
    return (settings.endpoint or DEFAULT_BASES.get(backend, "")).rstrip("/")


def api_client(settings: WebSettings) -> Any:
    """A client for the configured APIs (proxies from the environment are honoured here)."""
    import httpx2

    return httpx2.AsyncClient(timeout=settings.timeout, headers={"User-Agent": USER_AGENT},
                              follow_redirects=True)


async def call_api(client: Any, backend: str, method: str, url: str, **kwargs: Any) -> Any:
    """The JSON answer of one API request; WebError saying what went wrong and what to do."""
    import httpx2

    try:
        response = await client.request(method, url, **kwargs)
    except httpx2.TimeoutException:
        raise WebError(f"{backend} did not answer in time") from None
    except httpx2.HTTPError as exc:
        raise WebError(f"cannot reach {backend} at {url}: {type(exc).__name__}: {exc}") from None
    if response.status_code in (401, 403):
        keys = " or ".join(KEY_ENV.get(backend, ()))
        hint = f": check {keys}" if keys else ""
        if backend == "searxng":
            hint = ": enable the JSON format in its settings.yml (search: formats: [html, json])"
        raise WebError(f"{backend} refused the request (HTTP {response.status_code}){hint}")
    if response.status_code == 429:
        raise WebError(f"{backend} rate limit reached (HTTP 429): wait, or lower the request rate")
    if response.status_code >= 400:
        first = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        raise WebError(f"{backend} answered HTTP {response.status_code}" + (f": {first}" if first else ""))
    try:
        data = response.json()
    except ValueError:
        raise WebError(f"{backend} answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise WebError(f"{backend} answered JSON of an unexpected shape (not an object)")
    return data


def _hits(items: Any, title: str, url: str, description: str, limit: int) -> list[Hit]:
    out: list[Hit] = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get(url), str):
            continue
        text = item.get(description)
        out.append(Hit(str(item.get(title) or item[url]), item[url],
                       " ".join(str(text or "").split())[:DESCRIPTION_CHARS]))
        if len(out) == limit:
            break
    return out


async def _searxng(client: Any, s: WebSettings, query: str, limit: int) -> list[Hit]:
    data = await call_api(client, "searxng", "GET", f"{base_url(s, 'searxng')}/search",
                          params={"q": query, "format": "json"})
    return _hits(data.get("results"), "title", "url", "content", limit)


async def _brave(client: Any, s: WebSettings, query: str, limit: int) -> list[Hit]:
    data = await call_api(client, "brave", "GET", f"{base_url(s, 'brave')}/res/v1/web/search",
                          params={"q": query, "count": limit},
                          headers={"X-Subscription-Token": s.keys["brave"], "Accept": "application/json"})
    return _hits((data.get("web") or {}).get("results"), "title", "url", "description", limit)


async def _tavily(client: Any, s: WebSettings, query: str, limit: int) -> list[Hit]:
    data = await call_api(client, "tavily", "POST", f"{base_url(s, 'tavily')}/search",
                          json={"query": query, "max_results": limit},
                          headers={"Authorization": f"Bearer {s.keys['tavily']}"})
    return _hits(data.get("results"), "title", "url", "content", limit)


async def _exa(client: Any, s: WebSettings, query: str, limit: int) -> list[Hit]:
    data = await call_api(client, "exa", "POST", f"{base_url(s, 'exa')}/search",
                          json={"query": query, "numResults": limit,
                                "contents": {"text": {"maxCharacters": DESCRIPTION_CHARS}}},
                          headers={"x-api-key": s.keys["exa"]})
    return _hits(data.get("results"), "title", "url", "text", limit)


async def _firecrawl(client: Any, s: WebSettings, query: str, limit: int) -> list[Hit]:
    data = await call_api(client, "firecrawl", "POST", f"{base_url(s, 'firecrawl')}/v1/search",
                          json={"query": query, "limit": limit},
                          headers={"Authorization": f"Bearer {s.keys['firecrawl']}"})
    items = data.get("data")
    if isinstance(items, dict):  # the v2 API groups results by source
        items = items.get("web")
    return _hits(items, "title", "url", "description", limit)


BACKENDS: dict[str, Backend] = {
    "searxng": _searxng, "brave": _brave, "tavily": _tavily, "exa": _exa, "firecrawl": _firecrawl,
}


async def search(settings: WebSettings, query: str, limit: int) -> list[Hit]:
    """Up to `limit` hits from the configured backend; WebError when it fails."""
    assert settings.search is not None, "web_search is offered only with a backend"
    async with api_client(settings) as client:
        return await BACKENDS[settings.search](client, settings, query, limit)
