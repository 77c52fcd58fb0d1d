"""One guarded GET: every redirect re-checked, bounded in time and bytes, typed by content.

    fetched = await fetch(client, url, settings)   # WebError (BlockedURL...) when it cannot

The client comes from `talaria.tools.web.guard.guarded_client`, so each connection goes to an
address the policy allowed; here each hop's URL is checked (scheme, credentials) before it is
requested, and a redirect is followed by hand, at most MAX_REDIRECTS times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import anyio

from talaria.tools.errors import WebError
from talaria.tools.images import sniff
from talaria.tools.web.guard import BlockedURL, check_url
from talaria.tools.web.settings import MAX_REDIRECTS, WebSettings

REDIRECTS = (301, 302, 303, 307, 308)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/rss+xml",
                        "application/atom+xml", "application/javascript", "application/x-yaml",
                        "application/yaml", "application/toml", "application/ld+json"})
ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5"
IMAGE_ACCEPT = "image/png,image/jpeg,image/webp,image/gif,image/*;q=0.8"


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str
    """The URL the body came from (after redirects)."""
    media_type: str
    """html, pdf or text; image when an image was asked for (`fetch(..., image=True)`)."""
    charset: str | None
    body: bytes
    truncated: bool
    """The body was longer than `max_bytes` and was cut there."""


def media_kind(content_type: str, head: bytes) -> str | None:
    """html, pdf or text for a Content-Type (sniffing the first bytes when it is missing or
    generic); None for what web_extract does not read (images, archives...)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in HTML_TYPES:
        return "html"
    if media in PDF_TYPES:
        return "pdf"
    if media.startswith("text/") or media in TEXT_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    if media in ("", "application/octet-stream", "binary/octet-stream"):
        start = head.lstrip()[:512].lower()
        if start.startswith(b"%pdf-"):
            return "pdf"
        if start.startswith((b"<!doctype html", b"<html")) or b"<body" in start:
            return "html"
        if media == "" and b"\x00" not in head[:1024]:
            return "text"
    return None


def image_kind(content_type: str, head: bytes) -> str | None:
    """"image" for an image's Content-Type (or a generic one whose bytes start like an
    image); None for anything else (what vision_analyze does not read)."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media.startswith("image/") and media != "image/svg+xml":
        return "image"
    if media in ("", "application/octet-stream", "binary/octet-stream") and sniff(head):
        return "image"
    return None


def charset_of(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return None


async def fetch(client: Any, url: str, settings: WebSettings, *, image: bool = False) -> Fetched:
    """GET `url`, following redirects; WebError with the reason when it cannot be read.
    `image`: the body must be an image (vision_analyze), whole: a longer one is refused."""
    import httpx2

    try:
        with anyio.fail_after(settings.page_deadline):
            return await _follow(client, url, settings, image)
    except TimeoutError:
        raise WebError(f"no complete answer within {settings.page_deadline:g} s") from None
    except httpx2.InvalidURL as exc:  # not an HTTPError: it would end every page's fetch
        raise BlockedURL(f"malformed URL: {exc}") from None
    except httpx2.TimeoutException:
        raise WebError(f"timed out after {settings.timeout:g} s without data") from None
    except httpx2.HTTPError as exc:
        raise WebError(f"could not connect: {type(exc).__name__}: {exc or 'no detail'}") from None


async def _follow(client: Any, url: str, settings: WebSettings, image: bool) -> Fetched:
    for _ in range(MAX_REDIRECTS + 1):
        check_url(url)
        accept = IMAGE_ACCEPT if image else ACCEPT
        async with client.stream("GET", url, headers={"Accept": accept}) as response:
            if response.status_code in REDIRECTS and response.headers.get("location"):
                url = urljoin(str(response.url), response.headers["location"])
                continue
            if response.status_code >= 400:
                reason = response.reason_phrase or "error"
                raise WebError(f"HTTP {response.status_code} {reason}")
            return await _read(response, str(response.url), settings, image)
    raise WebError(f"more than {MAX_REDIRECTS} redirects")


async def _read(response: Any, url: str, settings: WebSettings, image: bool = False) -> Fetched:
    content_type = response.headers.get("content-type", "")
    declared = response.headers.get("content-length", "")
    kind_of = image_kind if image else media_kind
    whole = ("pdf", "image")  # kinds a cut body is useless for
    body = bytearray()
    truncated = False
    kind: str | None = "?"
    async for chunk in response.aiter_bytes():  # decompressed: the cap also stops zip bombs
        if kind == "?":
            kind = kind_of(content_type, bytes(chunk[:1024]))
            if kind is None:
                break
            if kind in whole and declared.isdigit() and int(declared) > settings.max_bytes:
                break
        body += chunk
        if len(body) > settings.max_bytes:
            del body[settings.max_bytes:]
            truncated = True
            break
    if kind == "?":
        kind = kind_of(content_type, b"")
    shown = content_type.split(";", 1)[0].strip() or "unknown"
    if kind is None and image:
        raise WebError(f"not an image (content type {shown})")
    if kind is None:
        raise WebError(f"not a page web_extract can read (content type {shown}): it reads HTML, "
                       "text and PDF")
    too_big = declared.isdigit() and int(declared) > settings.max_bytes
    if kind in whole and (truncated or too_big):
        what = "PDF" if kind == "pdf" else "image"
        raise WebError(f"{what} larger than {settings.max_bytes // (1024 * 1024)} MiB: not read")
    return Fetched(url, kind, charset_of(content_type), bytes(body), truncated)
