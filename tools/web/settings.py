"""The web tools' settings and bounds: which backends, their keys, what may be fetched.

Front doors build `WebSettings` from `Config` with `web_settings(...)`: the search backend
(`web_search`), how pages are read (`web_extract`), the backend's address, and the API keys,
read from the environment (or `$TALARIA_HOME/credentials`) under the names each vendor
documents. No search backend and no extract mode: no web tools are offered at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from talaria.tools.web.guard import Network, parse_networks

SEARCH_BACKENDS = ("searxng", "brave", "tavily", "exa", "firecrawl")
EXTRACT_BACKENDS = ("local", "firecrawl", "tavily")
KEY_ENV: dict[str, tuple[str, ...]] = {
    "brave": ("BRAVE_API_KEY", "BRAVE_SEARCH_API_KEY"),
    "tavily": ("TAVILY_API_KEY",),
    "exa": ("EXA_API_KEY",),
    "firecrawl": ("FIRECRAWL_API_KEY",),
}
"""Where each backend's key is read, first found wins. SearXNG (self-hosted) needs none."""
ENDPOINT_ENV = "SEARXNG_URL"
"""SearXNG's address when `web_endpoint` is not set (the variable its docs use)."""

WEB_TOOLS = ("web_search", "web_extract")
TIMEOUT_S = 20.0
"""Connect / read / write timeout of one HTTP request."""
PAGE_DEADLINE_S = 30.0
"""Whole fetch of one page, redirects included: a server that drips bytes stops here."""
MAX_BYTES = 10 * 1024 * 1024
"""Bytes of one response read (after decompression); an HTML or text page is read up to
here, a longer PDF is refused (a cut PDF cannot be parsed)."""
MAX_REDIRECTS = 5
MAX_URLS = 20
"""URLs per web_extract call."""
CONCURRENCY = 8
"""Pages fetched at once by one call."""
PAGE_CHARS = 20_000
"""Characters of one page returned inline; longer pages are cut head + tail and saved."""
CALL_CHARS = 60_000
"""Characters of all pages of one call inline: with many URLs each gets less (not below
MIN_PAGE_CHARS)."""
MIN_PAGE_CHARS = 4_000
HEAD_SHARE = 0.6
"""Of a cut page, the share shown from its start (the rest from its end)."""
MAX_PDF_PAGES = 500
SEARCH_LIMIT = 5
MAX_RESULTS = 20
CACHE_TTL_S = 900.0
"""A fetched page is reused this long (`web_cache_ttl`)."""
CACHE_ENTRIES = 256
CACHE_CHARS = 64 * 1024 * 1024
"""Characters of page text the cache keeps in memory, all entries together."""
USER_AGENT = "Mozilla/5.0 (compatible; Talaria/0.1; +https://github.com/talaria-agent)"


@dataclass(frozen=True, slots=True)
class WebSettings:
    search: str | None
    """The search backend, or None: web_search is not offered."""
    extract: str
    """How web_extract reads pages: local (fetch + extraction here), firecrawl or tavily."""
    endpoint: str | None
    """The search backend's base URL (SearXNG's address; others: their API unless set)."""
    cache_dir: Path
    """Full texts of cut pages go here ($TALARIA_HOME/cache/web)."""
    cache_ttl: float
    keys: Mapping[str, str] = field(default_factory=dict, repr=False)
    """API keys by backend name."""
    allow: tuple[Network, ...] = ()
    """Networks beyond the public internet that pages may come from."""
    timeout: float = TIMEOUT_S
    page_deadline: float = PAGE_DEADLINE_S
    max_bytes: int = MAX_BYTES
    page_chars: int = PAGE_CHARS
    call_chars: int = CALL_CHARS

    def tools(self) -> tuple[str, ...]:
        """The web tools a session with these settings offers."""
        return WEB_TOOLS if self.search else ("web_extract",)


def web_settings(
    *, search: str | None, extract: str | None, endpoint: str | None, allow: tuple[str, ...],
    env: Mapping[str, str], cache_dir: Path, cache_ttl: float,
) -> tuple[WebSettings | None, list[str]]:
    """Settings from config values and the environment, or None when no web tool is on;
    with the problems that turned a configured tool off (a missing key), one line each."""
    problems: list[str] = []
    keys = {name: next((env[v] for v in names if env.get(v)), "") for name, names in KEY_ENV.items()}
    endpoint = endpoint or (env.get(ENDPOINT_ENV) if search == "searxng" else None)
    if search == "searxng" and not endpoint:
        problems.append("web_search = searxng needs its address: set web_endpoint in "
                        f"config.toml ([web] endpoint = \"http://localhost:8080\") or {ENDPOINT_ENV}")
        search = None
    elif search in KEY_ENV and not keys[search]:
        problems.append(f"web_search = {search} needs an API key in {' or '.join(KEY_ENV[search])}")
        search = None
    if extract in KEY_ENV and not keys[extract]:
        problems.append(f"web_extract = {extract} needs an API key in {' or '.join(KEY_ENV[extract])}; "
                        "pages are read locally instead")
        extract = "local"
    if search is None and extract is None:
        return None, problems
    return WebSettings(
        search=search, extract=extract or "local", endpoint=endpoint, cache_dir=cache_dir,
        cache_ttl=cache_ttl, keys={k: v for k, v in keys.items() if v},
        allow=parse_networks(allow),
    ), problems
