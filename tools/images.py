"""Images for a model: decoded and checked with Pillow, downscaled, re-encoded as PNG or JPEG.

    picture = prepare(data)   # VisionError when `data` is not an image that can be used

Bounds (each a named constant): the bytes read (`MAX_INPUT_BYTES`), the pixels decoded
(`MAX_INPUT_PIXELS`, so a small file cannot unpack into gigabytes), the longest edge sent
(`MAX_EDGE`, Anthropic's guidance: larger images are scaled down by the API anyway and cost
more time) and the bytes sent (`MAX_OUTPUT_BYTES`: PNG when it fits, else JPEG at falling
quality, else smaller). Re-encoding also drops metadata (EXIF GPS positions and the like).
Pillow is imported at the first image, not at start-up (start-up time and memory are measured).
Blocking: call it in a worker thread.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass
from typing import Any

from talaria.tools.errors import VisionError

MAX_INPUT_BYTES = 20 * 1024 * 1024
"""Bytes of one image read from a file, a URL or a data: URL."""
MAX_INPUT_PIXELS = 50_000_000
"""Pixels (width x height) of a source image decoded; a larger one is refused."""
MAX_EDGE = 1568
"""Longest edge, in pixels, of the image a model gets."""
MAX_OUTPUT_BYTES = 1_000_000
"""Bytes of the encoded image a model gets (base64 makes it a third larger on the wire)."""
JPEG_QUALITIES = (85, 70, 50)
MIN_EDGE = 64
"""Shrinking to fit MAX_OUTPUT_BYTES stops here (never reached by a real picture)."""
LOSSLESS_SOURCES = frozenset({"PNG", "GIF", "BMP", "TIFF", "ICO", "PPM"})
"""Formats of screenshots and diagrams: kept PNG when that fits (JPEG blurs text)."""
MAGIC = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG", b"GIF87a": "GIF", b"GIF89a": "GIF",
         b"BM": "BMP", b"II*\x00": "TIFF", b"MM\x00*": "TIFF"}
"""How image files start; WebP is RIFF....WEBP (`sniff`)."""


def sniff(head: bytes) -> str | None:
    """The image format `head` (a file's first bytes) starts like, or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    return next((fmt for magic, fmt in MAGIC.items() if head.startswith(magic)), None)


@dataclass(frozen=True, slots=True)
class Picture:
    mime_type: str
    """image/png or image/jpeg."""
    data: bytes
    width: int
    height: int
    source_format: str
    """What the source was (PNG, JPEG, WEBP, ...)."""
    source_size: tuple[int, int]

    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def resized(self) -> bool:
        return self.source_size != (self.width, self.height)


def prepare(data: bytes) -> Picture:
    """`data` as an image a model can take; VisionError saying why not (empty, too large, not
    an image, corrupt or truncated)."""
    if not data:
        raise VisionError("the image is empty (0 bytes)")
    if len(data) > MAX_INPUT_BYTES:
        raise VisionError(f"the image is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB: "
                          "not read (pass a smaller or cropped image)")
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image: Any = Image.open(io.BytesIO(data))
            source_format = str(image.format or "unknown")
            width, height = image.size
            if width * height > MAX_INPUT_PIXELS:
                raise VisionError(f"the image is {width}x{height} pixels, more than "
                                  f"{MAX_INPUT_PIXELS:,}: not decoded (pass a smaller image)")
            image.load()  # decodes now: a truncated or corrupt file fails here
            image = ImageOps.exif_transpose(image)
    except UnidentifiedImageError:
        raise VisionError(_not_an_image(data)) from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise VisionError(f"the image has more than {MAX_INPUT_PIXELS:,} pixels: not decoded") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise VisionError(f"the {source_format} image is corrupt or truncated: {exc}") from None
    return _encode(image, source_format, (width, height))


def _not_an_image(data: bytes) -> str:
    if fmt := sniff(data[:16]):
        return f"the {fmt} image is corrupt: its header cannot be read"
    head = data[:256].lstrip().lower()
    if head.startswith((b"<svg", b"<?xml")) and b"<svg" in data[:4096].lower():
        return "SVG images are not supported: render it to PNG first"
    return "not an image (or in a format that cannot be read: use PNG, JPEG, GIF, WebP or BMP)"


def _encode(image: Any, source_format: str, source_size: tuple[int, int]) -> Picture:
    from PIL import Image

    alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    image = image.convert("RGBA" if alpha else "RGB")
    image.thumbnail((MAX_EDGE, MAX_EDGE), Image.Resampling.LANCZOS)
    while True:
        if source_format in LOSSLESS_SOURCES or alpha:
            png = _save(image, "PNG", optimize=True)
            if len(png) <= MAX_OUTPUT_BYTES:
                return Picture("image/png", png, image.width, image.height, source_format, source_size)
        flat = image if not alpha else _on_white(image)
        for quality in JPEG_QUALITIES:
            jpeg = _save(flat, "JPEG", quality=quality, optimize=True)
            if len(jpeg) <= MAX_OUTPUT_BYTES:
                return Picture("image/jpeg", jpeg, image.width, image.height, source_format,
                               source_size)
        if max(image.size) // 2 < MIN_EDGE:
            raise VisionError(f"the image cannot be made smaller than {MAX_OUTPUT_BYTES:,} bytes")
        image = image.resize((max(1, image.width // 2), max(1, image.height // 2)),
                             Image.Resampling.LANCZOS)


def _on_white(image: Any) -> Any:
    from PIL import Image

    background = Image.new("RGB", image.size, (255, 255, 255))
    background.paste(image, mask=image.getchannel("A"))
    return background


def _save(image: Any, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()
