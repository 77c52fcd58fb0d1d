"""web_extract's work: many URLs at once, each a result or its own error, never one failure
for the batch. A session's `WebState` keeps what outlives a call: the settings, the page
cache, and a TLS context (building one costs ~20 ms, more than fetching a local page).

    results = await extract_pages(state, urls)   # [{"url", "title", "content", "error"?}, ...]

A page longer than its share of the call's budget (`page_limit`) is returned head + tail
with `omitted_chars` and `full_text_path`, where the whole text was saved for `read_file`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio

from talaria.tools.errors import WebError
from talaria.tools.web import spill
from talaria.tools.web.cache import Page, PageCache
from talaria.tools.web.guard import Policy, guarded_client
from talaria.tools.web.settings import (
    CONCURRENCY,
    HEAD_SHARE,
    MIN_PAGE_CHARS,
    USER_AGENT,
    WebSettings,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class WebState:
    settings: WebSettings
    cache: PageCache = field(init=False)
    _tls: Any = None
    _tls_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.cache = PageCache(self.settings.cache_ttl)

    def tls(self) -> Any:
        with self._tls_lock:
            if self._tls is None:
                import httpx2

                self._tls = httpx2.create_ssl_context(trust_env=False)
            return self._tls

    def warm(self) -> None:
        """Import the HTTP client and the extractors and build the TLS context in a thread,
        so that the first web_extract costs what the next ones do. Returns at once."""
        def run() -> None:
            try:
                import pypdf  # noqa: F401
                import trafilatura  # noqa: F401

                self.tls()
            except Exception:  # the first call will report whatever this hit
                log.debug("warming the web tools failed", exc_info=True)

        threading.Thread(target=run, name="talaria-web-warm", daemon=True).start()


def page_limit(settings: WebSettings, count: int) -> int:
    """Characters each page of a call with `count` pages gets inline."""
    return min(settings.page_chars, max(MIN_PAGE_CHARS, settings.call_chars // max(count, 1)))


async def extract_pages(state: WebState, urls: list[str]) -> list[dict[str, Any]]:
    """One result per URL, in order (a URL given twice is fetched once)."""
    settings = state.settings
    found: dict[str, Page | WebError] = {}
    for url in urls:
        if (page := state.cache.get(url)) is not None:
            found[url] = page
    missing = [url for url in dict.fromkeys(urls) if url not in found]
    if missing:
        fetched = await (_local(state, missing) if settings.extract == "local"
                         else _remote(settings, missing))
        for url, outcome in fetched.items():
            found[url] = outcome
            if isinstance(outcome, Page):
                state.cache.put(url, outcome)
    limit = page_limit(settings, len(urls))
    return [_result(url, found[url], limit, settings) for url in urls]


async def _remote(settings: WebSettings, urls: list[str]) -> dict[str, Page | WebError]:
    from talaria.tools.web import remote
    from talaria.tools.web.guard import BlockedURL, check_url

    out: dict[str, Page | WebError] = {}
    for url in urls:
        try:
            check_url(url)
        except BlockedURL as exc:
            out[url] = exc
    asked = [url for url in urls if url not in out]
    if asked:
        out.update(await remote.extract(settings, asked))
    return out


async def _local(state: WebState, urls: list[str]) -> dict[str, Page | WebError]:
    settings = state.settings
    out: dict[str, Page | WebError] = {}
    limiter = anyio.CapacityLimiter(CONCURRENCY)
    tls = await anyio.to_thread.run_sync(state.tls)
    client = guarded_client(Policy(settings.allow), timeout=settings.timeout,
                            user_agent=USER_AGENT, tls=tls)

    async def one(url: str) -> None:
        async with limiter:
            try:
                out[url] = await _fetch_page(client, url, settings)
            except WebError as exc:
                out[url] = exc

    async with client, anyio.create_task_group() as tg:
        for url in urls:
            tg.start_soon(one, url)
    return out


async def _fetch_page(client: Any, url: str, settings: WebSettings) -> Page:
    from talaria.tools.web.fetch import fetch
    from talaria.tools.web.read import read

    fetched = await fetch(client, url, settings)
    title, text = await anyio.to_thread.run_sync(read, fetched)
    return Page(url, fetched.url, title, text, fetched.media_type, fetched.truncated)


def _result(url: str, outcome: Page | WebError, limit: int, settings: WebSettings) -> dict[str, Any]:
    if isinstance(outcome, WebError):
        return {"url": url, "title": "", "content": "", "error": str(outcome)}
    result: dict[str, Any] = {"url": url, "title": outcome.title, "content": outcome.text}
    if outcome.final_url != url:
        result["final_url"] = outcome.final_url
    if not outcome.text.strip():
        result["note"] = "no readable text on this page"
    if outcome.truncated_download:
        result["note"] = (f"the page is larger than {settings.max_bytes // (1024 * 1024)} MiB: "
                          "only its first part was read")
    shown, omitted = spill.head_tail(outcome.text, limit, HEAD_SHARE)
    if omitted:
        try:
            path = spill.save(outcome.text, settings.cache_dir)
        except OSError as exc:
            log.warning("could not save a long page: %s", exc)
        else:
            result["full_text_path"] = str(path)
        result.update(content=shown, omitted_chars=omitted)
    return result
