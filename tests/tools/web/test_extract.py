"""web_extract's pages: main content as markdown, PDFs, every failure on its own URL, limits
in time and size, the cache, head + tail with the full text saved."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio

from benchmarks.webserver import ARTICLE_SENTENCE, PageServer
from talaria.tools.web import spill
from talaria.tools.web.pages import WebState, extract_pages, page_limit
from talaria.tools.web.settings import MIN_PAGE_CHARS, PAGE_CHARS, web_settings


def state(tmp_path: Path, **limits: Any) -> WebState:
    settings, _ = web_settings(search=None, extract="local", endpoint=None, allow=("127.0.0.0/8",),
                               env={}, cache_dir=tmp_path / "web", cache_ttl=60)
    assert settings is not None
    return WebState(dataclasses.replace(settings, **limits))


def extract(st: WebState, web: PageServer, *paths: str) -> list[dict[str, Any]]:
    return anyio.run(extract_pages, st, [web.url(p) for p in paths])


def test_main_content_without_boilerplate(tmp_path: Path, web: PageServer) -> None:
    (page,) = extract(state(tmp_path), web, "/article")
    assert page["title"] == "Rust async runtimes compared"
    assert page["content"].startswith("# Rust async runtimes compared")
    assert ARTICLE_SENTENCE.strip() in page["content"]
    assert "- tokio: multi-threaded" in page["content"]  # lists stay lists
    for boilerplate in ("Menu item", "cookies", "Copyright", "Careers"):
        assert boilerplate not in page["content"]
    assert set(page) == {"url", "title", "content"}  # Hermes' shape


def test_pdf_text_plain_text_and_compressed_pages(tmp_path: Path, web: PageServer) -> None:
    pdf, text, gz = extract(state(tmp_path), web, "/doc.pdf", "/plain.txt", "/gzip")
    assert "revenue grew 12 percent" in pdf["content"] and "outlook is stable" in pdf["content"]
    assert pdf["content"].index("page 1") < pdf["content"].index("page 2")
    assert text["content"] == "plain text, café"  # its declared charset, latin-1
    assert gz["title"] == "Rust async runtimes compared"


def test_each_url_fails_on_its_own(tmp_path: Path, web: PageServer) -> None:
    ok, missing, loop, image, blocked = extract(state(tmp_path), web, "/redirect/4", "/missing",
                                                "/loop", "/image.png", "/to-metadata")
    assert ok["final_url"] == web.url("/article") and "Tokio" in ok["content"]
    assert missing == {"url": web.url("/missing"), "title": "", "content": "",
                       "error": "HTTP 404 Not Found"}
    assert loop["error"] == "more than 5 redirects"
    assert "content type image/png" in image["error"]
    assert "169.254.169.254" in blocked["error"]


def test_unreachable_and_unknown_hosts_are_errors_of_their_url(tmp_path: Path, web: PageServer) -> None:
    from tests.tools.mcp.servers import free_port

    closed = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    refused, unknown, fine = anyio.run(extract_pages, state(tmp_path),
                                       [closed, "http://no-such-host.invalid/", web.url("/article")])
    assert refused["error"].startswith("could not connect: ConnectError") and refused["content"] == ""
    assert refused["error"].count("\n") == 0  # one line
    assert unknown["error"].startswith("cannot resolve 'no-such-host.invalid'")
    assert "Tokio" in fine["content"]


def test_a_slow_page_times_out_alone(tmp_path: Path) -> None:
    with PageServer(slow_s=5) as web:
        st = state(tmp_path, timeout=0.5, page_deadline=1.0)
        slow, drip, fine = extract(st, web, "/slow", "/drip", "/article")
    assert "timed out" in slow["error"] or "no complete answer" in slow["error"]
    assert "no complete answer within 1 s" in drip["error"]  # bytes keep coming, too slowly
    assert "Tokio" in fine["content"]


def test_a_long_page_is_cut_head_and_tail_and_saved(tmp_path: Path, web: PageServer) -> None:
    (page,) = extract(state(tmp_path), web, "/huge")
    assert len(page["content"]) < PAGE_CHARS + 200  # the marker
    assert page["content"].startswith("# A very long page")
    assert page["content"].rstrip().endswith("THE END MARKER")
    full = Path(page["full_text_path"]).read_text()
    assert full.count("Section") == 900 and page["omitted_chars"] == len(full) - PAGE_CHARS
    assert Path(page["full_text_path"]).parent == tmp_path / "web"


def test_the_budget_is_shared_by_the_pages_of_a_call(tmp_path: Path) -> None:
    st = state(tmp_path)
    assert page_limit(st.settings, 1) == PAGE_CHARS
    assert page_limit(st.settings, 6) == st.settings.call_chars // 6
    assert page_limit(st.settings, 20) == MIN_PAGE_CHARS


def test_a_response_beyond_max_bytes_is_cut_there(tmp_path: Path, web: PageServer) -> None:
    giant, pdf = extract(state(tmp_path, max_bytes=200_000), web, "/giant", "/doc.pdf")
    assert "only its first part was read" in giant["note"] and "Tokio" in giant["content"]
    (pdf_small,) = extract(state(tmp_path, max_bytes=100), web, "/doc.pdf")
    assert "PDF larger than" in pdf_small["error"]  # a cut PDF cannot be read
    assert "revenue" in pdf["content"]


def test_the_cache_pays_once_for_a_page(tmp_path: Path, web: PageServer) -> None:
    st = state(tmp_path)
    first = extract(st, web, "/article", "/article")  # twice in one call: one fetch
    second = extract(st, web, "/article")
    assert web.hits["/article"] == 1
    assert first[0] == first[1] == second[0]
    extract(st, web, "/missing")
    extract(st, web, "/missing")
    assert web.hits["/missing"] == 2  # failures are not cached
    st.cache.ttl = 0  # expired: fetched again
    extract(st, web, "/article")
    assert web.hits["/article"] == 2


def test_spill_prunes_old_files(tmp_path: Path) -> None:
    for i in range(5):
        spill.save(f"text {i}", tmp_path)
    assert spill.prune(tmp_path, max_files=2) == 3
    assert len(list(tmp_path.iterdir())) == 2
    assert spill.head_tail("abcdefghij", 4, 0.5) == (
        "ab\n\n[... 6 characters omitted: the full text is in the saved file ...]\n\nij", 6)


def test_the_cache_is_bounded_in_entries_and_characters() -> None:
    from talaria.tools.web.cache import Page, PageCache

    now = [0.0]
    cache = PageCache(10, max_entries=3, max_chars=100, clock=lambda: now[0])
    for i in range(4):
        cache.put(f"u{i}", Page(f"u{i}", f"u{i}", "", "x" * 10, "html"))
    assert len(cache) == 3 and cache.get("u0") is None  # the oldest went first
    cache.put("big", Page("big", "big", "", "y" * 95, "html"))
    assert len(cache) == 1 and cache.get("big") is not None  # characters bound it too
    cache.put("huge", Page("huge", "huge", "", "z" * 101, "html"))
    assert cache.get("huge") is None and cache.get("big") is not None  # never worth it
    now[0] = 11
    assert cache.get("big") is None  # expired
