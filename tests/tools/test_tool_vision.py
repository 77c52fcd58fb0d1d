"""vision_analyze's inputs: real images made with Pillow, read from files, data: URLs and the
local page server; every bad input is a one-line error that changes nothing."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from benchmarks.webserver import PageServer
from talaria.acp_server.history import replay_updates
from talaria.agent.loop import run_turn
from talaria.tools.errors import VisionError
from talaria.tools.images import (
    MAX_EDGE,
    MAX_INPUT_BYTES,
    MAX_INPUT_PIXELS,
    MAX_OUTPUT_BYTES,
    prepare,
)
from tests.helpers import make_session, recorded

VISION_MODEL = "openai:gpt-4o"


def png(size: tuple[int, int] = (40, 30), color: tuple[int, ...] = (200, 30, 30), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, color).save(out, "PNG")
    return out.getvalue()


def noise(size: tuple[int, int], fmt: str = "PNG") -> bytes:
    """An image that compresses badly (random pixels), to meet the output cap."""
    import os

    image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def call(session: Any, fake_llm: Any, args: dict[str, Any]) -> dict[str, Any]:
    """One vision_analyze call in a turn; its result as the model read it."""
    fake_llm.script([{"tool_calls": [{"name": "vision_analyze", "arguments": args}]},
                     {"text": "done"}])
    before = len(session.messages)
    assert anyio.run(run_turn, session, "look") == "end_turn"
    result = next(m for m in session.messages[before:] if m["role"] == "tool")
    return json.loads(result["content"])


def attached(session: Any) -> list[dict[str, Any]]:
    return [m for m in session.messages if m.get("tool_image")]


# -- the image itself ------------------------------------------------------------------------

def test_a_small_png_is_kept_png_and_its_size() -> None:
    picture = prepare(png((40, 30)))
    assert (picture.mime_type, picture.width, picture.height, picture.resized) == ("image/png", 40, 30, False)
    assert Image.open(io.BytesIO(picture.data)).format == "PNG"


def test_a_large_image_is_downscaled_to_the_edge_bound() -> None:
    picture = prepare(png((4000, 1000)))
    assert (picture.width, picture.height) == (MAX_EDGE, MAX_EDGE // 4)
    assert picture.source_size == (4000, 1000) and picture.resized


def test_output_bytes_bound_turns_a_noisy_png_into_jpeg() -> None:
    source = noise((1500, 1000))
    assert len(source) > MAX_OUTPUT_BYTES
    picture = prepare(source)
    assert picture.mime_type == "image/jpeg" and len(picture.data) <= MAX_OUTPUT_BYTES
    assert Image.open(io.BytesIO(picture.data)).format == "JPEG"


def test_transparency_stays_png() -> None:
    picture = prepare(png((20, 20), (0, 0, 0, 0), "RGBA"))
    assert picture.mime_type == "image/png"
    assert Image.open(io.BytesIO(picture.data)).mode == "RGBA"


def test_webp_gif_and_jpeg_sources_are_read() -> None:
    for fmt in ("WEBP", "GIF", "JPEG", "BMP"):
        out = io.BytesIO()
        Image.new("RGB", (16, 8), (1, 2, 3)).save(out, fmt)
        picture = prepare(out.getvalue())
        assert (picture.width, picture.height, picture.source_format) == (16, 8, fmt)


@pytest.mark.parametrize(("data", "message"), [
    (b"", "empty"),
    (b"hello, this is text\n" * 10, "not an image"),
    (b"<svg xmlns='http://www.w3.org/2000/svg'></svg>", "SVG images are not supported"),
    (png((200, 200))[:60], "corrupt or truncated"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "PNG image is corrupt"),
])
def test_bad_bytes_are_refused_with_the_reason(data: bytes, message: str) -> None:
    with pytest.raises(VisionError, match=message):
        prepare(data)


def test_truncated_jpeg_is_refused() -> None:
    whole = noise((300, 300), "JPEG")
    with pytest.raises(VisionError, match="corrupt or truncated"):
        prepare(whole[: len(whole) // 2])


def test_input_bounds() -> None:
    with pytest.raises(VisionError, match="larger than 20 MiB"):
        prepare(b"\x89PNG" + b"\x00" * MAX_INPUT_BYTES)
    # A tiny file that declares more pixels than MAX_INPUT_PIXELS is not decoded.
    side = int(MAX_INPUT_PIXELS ** 0.5) + 1
    out = io.BytesIO()
    Image.new("1", (side, side)).save(out, "PNG")
    assert len(out.getvalue()) < 1_000_000
    with pytest.raises(VisionError, match="pixels"):
        prepare(out.getvalue())


def test_pillow_is_not_imported_at_start() -> None:
    import subprocess
    import sys

    code = ("import sys; from talaria.tools.builtin import load_builtin_tools; load_builtin_tools(); "
            "import talaria.agent.runtime, talaria.tools.image_sources; print('PIL' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- where it comes from ---------------------------------------------------------------------

def test_file_attached_for_a_vision_model(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model=VISION_MODEL)
    (session.cwd / "shot.png").write_bytes(png((64, 48)))
    result = call(session, fake_llm, {"image_url": "shot.png", "question": "What colour?"})
    assert result["attached"] is True and result["success"] is True
    assert (result["image"], result["width"], result["height"]) == ("shot.png", 64, 48)
    assert "What colour?" in result["analysis"]
    [message] = attached(session)
    assert message["content"][1]["mime_type"] == "image/png"
    assert Image.open(io.BytesIO(base64.b64decode(message["content"][1]["data"]))).size == (64, 48)
    card = recorded(session).of("ToolCallStarted")[0]
    assert card.kind == "read" and card.locations == (str(session.cwd / "shot.png"),)


def test_data_url_attached(fake_llm, tmp_path: Path) -> None:
    session = make_session(fake_llm, tmp_path, model=VISION_MODEL)
    result = call(session, fake_llm, {"image_url": data_url(png((10, 12))), "question": "q"})
    assert result["attached"] and (result["width"], result["height"]) == (10, 12)
    card = recorded(session).of("ToolCallStarted")[0]
    assert card.locations == () and card.title == "Look at an inline image"


def test_url_through_the_web_guard(fake_llm, tmp_path: Path) -> None:
    with PageServer() as web:
        web.files["/shot.png"] = (png((33, 22)), "image/png")
        web.files["/shot.bin"] = (png((5, 5)), "application/octet-stream")
        session = make_session(fake_llm, tmp_path, model=VISION_MODEL,
                               web_allow_networks=["127.0.0.0/8"])
        result = call(session, fake_llm, {"image_url": web.url("/shot.png"), "question": "q"})
        assert result["attached"] and (result["width"], result["height"]) == (33, 22)
        assert web.requests[-1]["headers"]["Accept"].startswith("image/")
        card = recorded(session).of("ToolCallStarted")[-1]
        assert card.kind == "fetch" and card.locations == ()
        replayed = [u for u in replay_updates(session.messages, {s.name: s for s in session.tools})
                    if u["sessionUpdate"] == "tool_call"]
        assert [u["kind"] for u in replayed] == ["fetch"]  # session/load shows the same card
        sniffed = call(session, fake_llm, {"image_url": web.url("/shot.bin"), "question": "q"})
        assert sniffed["width"] == 5
        # A redirect is followed and checked again.
        web.redirects["/hop"] = "/shot.png"
        assert call(session, fake_llm, {"image_url": web.url("/hop"), "question": "q"})["width"] == 33


def test_url_errors(fake_llm, tmp_path: Path) -> None:
    with PageServer() as web:
        blocked = make_session(fake_llm, tmp_path, model=VISION_MODEL)  # no web_allow_networks
        result = call(blocked, fake_llm, {"image_url": web.url("/image.png"), "question": "q"})
        assert "which is loopback" in result["error"] and not attached(blocked)
        assert web.hits["/image.png"] == 0
        session = make_session(fake_llm, tmp_path, model=VISION_MODEL,
                               web_allow_networks=["127.0.0.0/8"])
        cases = {"/article": "not an image (content type text/html)",
                 "/image.png": "PNG image is corrupt",  # the server's PNG is a signature and zeros
                 "/missing": "HTTP 404",
                 "/to-metadata": "169.254.169.254"}
        for path, message in cases.items():
            result = call(session, fake_llm, {"image_url": web.url(path), "question": "q"})
            assert message in result["error"], (path, result)
        web.files["/big.png"] = (b"\x89PNG\r\n\x1a\n" + b"\x00" * MAX_INPUT_BYTES, "image/png")
        result = call(session, fake_llm, {"image_url": web.url("/big.png"), "question": "q"})
        assert "image larger than 20 MiB" in result["error"]
        assert not attached(session)


@pytest.mark.parametrize(("args", "message"), [
    ({"image_url": "missing.png", "question": "q"}, "Image file not found: missing.png"),
    ({"image_url": "notes.txt", "question": "q"}, "not an image"),
    ({"image_url": "broken.png", "question": "q"}, "corrupt or truncated"),
    ({"image_url": "huge.png", "question": "q"}, "larger than 20 MiB"),
    ({"image_url": "sub", "question": "q"}, "is a directory"),
    ({"image_url": "data:image/png;base64,@@@", "question": "q"}, "not valid base64"),
    ({"image_url": "data:image/png,abc", "question": "q"}, "not base64"),
    ({"image_url": "data:text/plain;base64,aGk=", "question": "q"}, "text/plain, not an image"),
    ({"image_url": "data:image/png;base64", "question": "q"}, "no ','"),
    ({"image_url": "ftp://example.com/a.png", "question": "q"}, "only http(s) and data: URLs"),
    # Judged a path by the permission check, so never read as a URL to elsewhere.
    ({"image_url": "file:///etc/passwd", "question": "q"}, "only http(s) and data: URLs"),
    ({"image_url": "data:../../x.png;base64,AAAA", "question": "q"}, "not an image"),
    ({"image_url": "", "question": "q"}, "image_url is required"),
    ({"image_url": "shot.png", "question": " "}, "question is required"),
    ({"image_url": "shot.png"}, "Missing argument(s): question"),
    ({"question": "q"}, "Missing argument(s): image_url"),
])
def test_bad_input_is_one_clear_line_and_changes_nothing(fake_llm, tmp_path: Path, args, message) -> None:
    session = make_session(fake_llm, tmp_path, model=VISION_MODEL)
    (session.cwd / "notes.txt").write_text("not an image\n")
    (session.cwd / "shot.png").write_bytes(png())
    (session.cwd / "broken.png").write_bytes(png((300, 300))[:80])
    if args.get("image_url") == "huge.png":
        (session.cwd / "huge.png").write_bytes(b"\x89PNG" + b"\x00" * MAX_INPUT_BYTES)
    (session.cwd / "sub").mkdir()
    before = sorted(p.name for p in session.cwd.iterdir())
    result = call(session, fake_llm, args)
    assert message in result["error"] and "\n" not in result["error"]
    assert not attached(session)
    assert sorted(p.name for p in session.cwd.iterdir()) == before


def test_reading_a_secret_or_outside_the_project_asks(fake_llm, tmp_path: Path) -> None:
    asked: list[Any] = []

    async def asker(ask: Any) -> str:
        asked.append(ask)
        return "reject_once"

    session = make_session(fake_llm, tmp_path, model=VISION_MODEL, mode="default", asker=asker)
    (tmp_path / "outside.png").write_bytes(png())
    (session.cwd / "id_rsa").write_bytes(png())
    for path in (str(tmp_path / "outside.png"), "id_rsa"):
        result = call(session, fake_llm, {"image_url": path, "question": "q"})
        assert result["rejected"] is True
    assert ["outside the project" in asked[0].reason, "sensitive path" in asked[1].reason] == [True, True]
    # Inside the project, an ordinary file is read without a question; a URL is a fetch,
    # which asks in default mode like web_extract.
    (session.cwd / "ok.png").write_bytes(png())
    assert call(session, fake_llm, {"image_url": "ok.png", "question": "q"})["attached"]
    result = call(session, fake_llm, {"image_url": "https://example.com/a.png", "question": "q"})
    assert result["rejected"] and asked[-1].kind == "fetch" and len(asked) == 3
    assert not attached(session)[1:]


MAX_VISION_DEFINITION_CHARS = 500
"""vision_analyze rides along in every request of a session that has it (beyond the default
set's budget, like the web tools): keep it near 120 tokens."""


def test_the_definition_is_small() -> None:
    from talaria.tools.builtin import load_builtin_tools

    spec = load_builtin_tools().get("vision_analyze")
    assert spec is not None and spec.toolset == "vision"
    assert len(json.dumps(spec.definition())) <= MAX_VISION_DEFINITION_CHARS
    assert (spec.kind, spec.parallel_safe, spec.path_args, spec.url_args) == (
        "read", True, ("image_url",), ("image_url",))
    from talaria.agent.trajectories.batch.worker import resolve_tools

    assert resolve_tools(["core", "vision"])[-1] == "vision_analyze"  # batch: --toolsets core vision


def test_only_url_args_may_hold_urls(fake_llm, tmp_path: Path) -> None:
    """A write's path that looks like a URL is still a path to the permission check."""
    from talaria.agent.providers.base import ToolCallRequest
    from talaria.agent.tool_runner import plan_call

    session = make_session(fake_llm, tmp_path, model=VISION_MODEL)
    for raw in ("data:../../x", "https://example.com/x"):
        write = plan_call(session, ToolCallRequest("1", "write_file", json.dumps({"path": raw, "content": ""})))
        assert write.paths and write.kind == "edit"
    look = plan_call(session, ToolCallRequest("2", "vision_analyze", json.dumps(
        {"image_url": "HTTPS://example.com/x.png", "question": "q"})))
    assert look.paths == () and look.kind == "fetch"
