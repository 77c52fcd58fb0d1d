"""Where vision_analyze's image comes from: a file, an http(s) URL or a data: URL.

    data, label = await load(raw, ctx)   # bytes (at most MAX_INPUT_BYTES) and how to name them

- A file is read from this machine's disk: the Workspace seam reads text only, and the files
  of the door's workspace (an editor's included) and of environments that share them (docker,
  singularity) live here. Where files live elsewhere (ssh, cloud sandboxes) the helper cannot
  hand bytes over, so the call says so instead of reading a stale local copy.
- A URL goes through the web tools' fetch (`talaria.tools.web.fetch`): the SSRF guard with
  its pinned addresses, every redirect checked, bounded in time and bytes. `[web]` need not be
  configured: it chooses search backends and keys; what may be fetched is the guard's policy
  (public addresses, plus `web_allow_networks`).
- A data: URL must be base64 and of an image type.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import replace
from pathlib import Path

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.environments.base import environment_of
from talaria.tools.errors import VisionError, WebError
from talaria.tools.images import MAX_INPUT_BYTES
from talaria.tools.paths import display, resolve

LABEL_CHARS = 100
"""A URL named in results is cut here."""
DATA_URL_HINT = "write it as data:image/png;base64,..."


async def load(raw: str, ctx: ToolContext) -> tuple[bytes, str]:
    """The image's bytes and a short name for it; VisionError (or FileNotFoundError) when
    they cannot be had."""
    text = raw.strip()
    scheme = text[:8].lower()
    if scheme.startswith("data:"):
        data = decode_data_url(text)
        return data, f"an inline image ({len(data):,} bytes)"
    if scheme.startswith(("http://", "https://")):
        label = text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"
        return await fetch_image(text, ctx), label
    if "://" in text[:16]:
        raise VisionError(f"only http(s) and data: URLs are read, not {text.split('://')[0]}://")
    path = resolve(text, ctx.cwd)
    return await read_image_file(path, ctx), display(path, ctx.cwd)


def decode_data_url(url: str) -> bytes:
    head, comma, payload = url.partition(",")
    if not comma:
        raise VisionError(f"malformed data URL: no ',' before the data ({DATA_URL_HINT})")
    params = [p.strip().lower() for p in head[len("data:"):].split(";")]
    mime = params[0]
    if mime and not mime.startswith("image/"):
        raise VisionError(f"the data URL holds {mime}, not an image")
    if "base64" not in params[1:]:
        raise VisionError(f"the data URL is not base64 ({DATA_URL_HINT})")
    payload = "".join(payload.split())
    if len(payload) > (MAX_INPUT_BYTES + 2) // 3 * 4:  # checked before decoding it
        raise VisionError(f"the image is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB: not read")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise VisionError(f"malformed data URL: its data is not valid base64 ({DATA_URL_HINT})") from None
    if not data:
        raise VisionError("the data URL holds no data")
    return data


async def fetch_image(url: str, ctx: ToolContext) -> bytes:
    from talaria.tools.web.fetch import fetch
    from talaria.tools.web.guard import Policy, guarded_client, parse_networks
    from talaria.tools.web.settings import USER_AGENT, WebSettings

    web = ctx.state.web
    allow = ctx.state.vision.allow if ctx.state.vision is not None else ()
    if web is not None:
        settings, tls = web.settings, await anyio.to_thread.run_sync(web.tls)
    else:
        settings = WebSettings(search=None, extract="local", endpoint=None, cache_dir=Path(),
                               cache_ttl=0.0, allow=parse_networks(allow))
        tls = await anyio.to_thread.run_sync(_tls)
    settings = replace(settings, max_bytes=MAX_INPUT_BYTES)
    client = guarded_client(Policy(settings.allow), timeout=settings.timeout,
                            user_agent=USER_AGENT, tls=tls)
    try:
        async with client:
            fetched = await fetch(client, url, settings, image=True)
    except WebError as exc:
        raise VisionError(f"cannot fetch the image at {url[:LABEL_CHARS]}: {exc}") from None
    return fetched.body


def _tls() -> object:
    import httpx2

    return httpx2.create_ssl_context(trust_env=False)


async def read_image_file(path: Path, ctx: ToolContext) -> bytes:
    env = environment_of(ctx.workspace)
    if env is not None and not getattr(env.env, "shares_files", False):
        raise VisionError(
            f"{display(path, ctx.cwd)} is in the {env.name} environment ({env.where}), where "
            "vision_analyze cannot read image files: copy it into the project here, or pass "
            "an http(s) URL or a data: URL")
    return await anyio.to_thread.run_sync(_read_bytes, path)


def _read_bytes(path: Path) -> bytes:
    st = os.stat(path)  # FileNotFoundError for the caller; a FIFO must not be opened
    if stat.S_ISDIR(st.st_mode):
        raise VisionError(f"{path} is a directory, not an image file")
    if not stat.S_ISREG(st.st_mode):
        raise VisionError(f"{path} is not a regular file")
    if st.st_size > MAX_INPUT_BYTES:
        raise VisionError(f"the image is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB "
                          f"({st.st_size:,} bytes): not read (pass a smaller or cropped image)")
    with open(path, "rb") as f:
        return f.read(MAX_INPUT_BYTES + 1)  # grown since the stat: prepare() refuses it
