"""Pages read by a service instead of here (`web_extract = "firecrawl"` or `"tavily"`): for
sites that need a browser, or to keep fetches off this machine. Same result per URL: a
`Page`, or the service's reason in a WebError."""

from __future__ import annotations

from typing import Any

import anyio

from talaria.tools.errors import WebError
from talaria.tools.web.cache import Page
from talaria.tools.web.search import api_client, base_url, call_api
from talaria.tools.web.settings import CONCURRENCY, WebSettings


async def firecrawl(client: Any, settings: WebSettings, url: str) -> Page:
    data = await call_api(client, "firecrawl", "POST", f"{base_url(settings, 'firecrawl')}/v1/scrape",
                          json={"url": url, "formats": ["markdown"], "onlyMainContent": True},
                          headers={"Authorization": f"Bearer {settings.keys['firecrawl']}"})
    page = data.get("data")
    if not data.get("success", True) or not isinstance(page, dict):
        raise WebError(f"firecrawl could not read it: {data.get('error') or 'no data'}")
    meta = page.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return Page(url, str(meta.get("sourceURL") or url), str(meta.get("title") or ""),
                str(page.get("markdown") or ""), "html")


async def tavily(client: Any, settings: WebSettings, urls: list[str]) -> dict[str, Page | WebError]:
    data = await call_api(client, "tavily", "POST", f"{base_url(settings, 'tavily')}/extract",
                          json={"urls": urls},
                          headers={"Authorization": f"Bearer {settings.keys['tavily']}"})
    out: dict[str, Page | WebError] = {}
    for item in data.get("results") or ():
        if isinstance(item, dict) and item.get("url") in urls:
            out[item["url"]] = Page(item["url"], item["url"], str(item.get("title") or ""),
                                    str(item.get("raw_content") or ""), "html")
    for item in data.get("failed_results") or ():
        if isinstance(item, dict) and item.get("url") in urls:
            out[item["url"]] = WebError(f"tavily could not read it: {item.get('error') or 'no reason given'}")
    for url in urls:
        out.setdefault(url, WebError("tavily returned nothing for this URL"))
    return out


async def extract(settings: WebSettings, urls: list[str]) -> dict[str, Page | WebError]:
    """Each URL's page or error, read by the configured service."""
    async with api_client(settings) as client:
        if settings.extract == "tavily":
            try:
                return await tavily(client, settings, urls)
            except WebError as exc:  # the whole request failed: every URL says why
                return dict.fromkeys(urls, exc)
        out: dict[str, Page | WebError] = {}
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def one(url: str) -> None:
            async with limiter:
                try:
                    out[url] = await firecrawl(client, settings, url)
                except WebError as exc:
                    out[url] = exc

        async with anyio.create_task_group() as tg:
            for url in urls:
                tg.start_soon(one, url)
        return out
