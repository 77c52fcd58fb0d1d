"""`vision_analyze`: look at an image (a file, an http(s) URL or a data: URL) to answer a
question about it (Hermes' name and arguments).

Three outcomes, by what the session has (`ToolState.vision`):
1. its model sees images: the image is attached to the model's next call (the runner adds it
   as a user message after this call's result, from `_attach`), and the result says so;
2. else an auxiliary `vision_model` answers the question, and its text is the result;
3. else a one-line error: the model cannot see images, and how to configure one that can.
Bad input (no image, not an image, corrupt, too large, a blocked URL) is an error result and
changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from talaria.tools.context import ToolContext
from talaria.tools.errors import VisionError
from talaria.tools.registry import tool

if TYPE_CHECKING:
    from talaria.tools.images import Picture

NO_VISION = ("the current model cannot see images and no vision_model is configured: set "
             "vision_model (e.g. vision_model = \"openai:gpt-4.1\" in config.toml, or "
             "TALARIA_VISION_MODEL), or switch to a model that takes images")
FROM_SCRIPT = ("a script cannot show an image to the model and no vision_model is configured: "
               "call vision_analyze directly, or set vision_model")
TITLE_CHARS = 60


def _title(args: dict[str, Any]) -> str:
    raw = str(args.get("image_url") or "").strip()
    if raw[:5].lower() == "data:":
        return "Look at an inline image"
    return f"Look at {raw if len(raw) <= TITLE_CHARS else raw[:TITLE_CHARS - 1] + '…'}"


@tool(
    name="vision_analyze",
    description=(
        "Look at an image to answer a question about it: a file path, an http(s) URL or a "
        "data:image/...;base64 URL (screenshots, diagrams, photos)."),
    parameters={
        "type": "object",
        "properties": {
            "image_url": {"type": "string", "description": "Image file path, http(s) URL or data: URL"},
            "question": {"type": "string", "description": "What to find out from the image"},
        },
        "required": ["image_url", "question"],
    },
    kind="read",
    parallel_safe=True,
    path_args=("image_url",),
    url_args=("image_url",),
    title=_title,
    toolset="vision",
)
async def vision_analyze(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    raw, question = args.get("image_url"), args.get("question")
    if not isinstance(raw, str) or not raw.strip():
        return {"error": "image_url is required: an image file path, an http(s) URL or a data: URL"}
    if not isinstance(question, str) or not question.strip():
        return {"error": "question is required: what to find out from the image"}
    vision = ctx.state.vision
    attach = vision is not None and not ctx.nested and vision.sees()
    if not attach and (vision is None or vision.describe is None):
        return {"error": FROM_SCRIPT if ctx.nested else NO_VISION}
    # The image side is imported by the first look, not by every session's tool list (~1.5 ms).
    from talaria.tools.image_sources import load
    from talaria.tools.images import prepare

    try:
        data, label = await load(raw, ctx)
    except FileNotFoundError:
        return {"error": f"Image file not found: {raw.strip()}"}
    picture = await anyio.to_thread.run_sync(prepare, data)
    facts = _facts(picture, label)
    if attach:
        note = f"[vision_analyze: {label}, {facts['width']}x{facts['height']}] {question.strip()}"
        return {
            "success": True, "attached": True, **facts,
            "analysis": "The image is attached right after this result: look at it to answer "
                        f"the question: {question.strip()}",
            "_attach": {"text": note, "mime_type": picture.mime_type, "data": picture.b64()},
            "_display": f"Showed {label} to the model ({_size(picture)})",
        }
    assert vision is not None and vision.describe is not None
    answer = (await vision.describe(picture.mime_type, picture.b64(), question.strip())).strip()
    if not answer:
        raise VisionError(f"the vision model {vision.model} returned no answer")
    return {"success": True, "analysis": answer, "model": vision.model, **facts,
            "_display": f"{vision.model} on {label} ({_size(picture)}):\n{answer}"}


def _facts(picture: Picture, label: str) -> dict[str, Any]:
    facts: dict[str, Any] = {"image": label, "width": picture.width, "height": picture.height,
                             "bytes": len(picture.data)}
    if picture.resized:
        facts["resized_from"] = "{}x{}".format(*picture.source_size)
    return facts


def _size(picture: Picture) -> str:
    kind = picture.mime_type.removeprefix("image/").upper()
    return f"{picture.width}x{picture.height} {kind}, {len(picture.data) / 1024:,.0f} KB"
