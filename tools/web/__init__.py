"""Tools that reach the web: `web_search` (a configured search backend) and `web_extract`
(pages as markdown, fetched through an SSRF guard, or through a reading service).

    settings.py  which backends, their keys, every bound      guard.py  where fetches may go
    addresses.py what an address is (IANA tables, IPv4 in IPv6)
    search.py    the search backends                          fetch.py  one guarded GET
    read.py      HTML -> markdown, PDF -> text                 pages.py  many URLs, cache, caps
    remote.py    Firecrawl / Tavily extraction                 spill.py  head + tail, saved texts
    web_search.py, web_extract.py: the tools themselves (offered only when configured).

Imports httpx2 (what the `mcp` SDK uses), the extraction and PDF libraries (lazily) and `talaria.tools` (registry,
context, errors); nothing from `talaria.agent` or `talaria.acp_server`.
"""
