"""A real MCP server, written with the official `mcp` SDK, for the MCP client tests.

    python tests/mcp_server.py [--name N] [--hang] [--exit-at-start] [--delay S]
                               [--huge-schema] [--http PORT | --sse PORT]

Tools: add(a, b), echo(text), sleep(seconds), crash() (exits mid-call), fail() (an error
result), big() (200,000 characters), picture() (an image), weird(...) (a schema full of what
providers reject; answers with the arguments it got), whoami() (its pid and environment
marker), grow() (adds a tool extraN and announces the change). A resource `note://hello` and a prompt `greet(name)`. `--hang` never answers the
handshake, `--exit-at-start` exits with status 2 at once, `--delay` sleeps before serving,
`--huge-schema` adds a tool whose schema is ~100 KB, `--lie` a tool liar() that writes a
line that is not JSON-RPC to stdout and answers off its declared output schema. Stdio by default; `--http` serves
streamable HTTP on 127.0.0.1:PORT/mcp, `--sse` SSE on 127.0.0.1:PORT/sse.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

WEIRD_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "file path": {"type": "string", "description": "a key with a space"},
        "tags": {"type": "array"},
        "mode": {"$ref": "#/$defs/Mode"},
        "node": {"$ref": "#/$defs/Node"},
        "flag": True,
        "count": {"type": "int"},
    },
    "required": ["file path", "missing"],
    "anyOf": [{"properties": {"extra": {"type": "string"}}}],
    "$defs": {
        "Mode": {"type": "string", "enum": ["fast", "slow"]},
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
    },
}


def huge_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {
        f"field_{i}": {"type": "string", "description": "x" * 100} for i in range(1000)}}


def build(args: argparse.Namespace) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(name="add", description="Add two integers.", input_schema={
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]}, annotations=types.ToolAnnotations(read_only_hint=True)),
        types.Tool(name="echo", description="Echo the text.", input_schema={
            "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        types.Tool(name="sleep", description="Sleep.", input_schema={
            "type": "object", "properties": {"seconds": {"type": "number"}}}),
        types.Tool(name="crash", description="Exit in the middle of the call.",
                   input_schema={"type": "object", "properties": {}}),
        types.Tool(name="fail", description="Report an error.", input_schema={"type": "object"}),
        types.Tool(name="big", description="A long answer.", input_schema={"type": "object"}),
        types.Tool(name="picture", description="An image.", input_schema={"type": "object"}),
        types.Tool(name="weird", description="A schema providers reject.", input_schema=WEIRD_SCHEMA),
        types.Tool(name="whoami", description="Pid and marker.", input_schema={"type": "object"}),
        types.Tool(name="grow", description="Add a tool (and say the list changed).",
                   input_schema={"type": "object"}),
    ]
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

    bus = InMemorySubscriptionBus()
    if args.lie:
        tools.append(types.Tool(name="liar", description="Answers outside its output schema.",
                                input_schema={"type": "object"}, output_schema={
                                    "type": "object", "properties": {"n": {"type": "integer"}},
                                    "required": ["n"]}))
    if args.huge_schema:
        tools.append(types.Tool(name="huge", description="Huge schema.", input_schema=huge_schema()))

    def text(value: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=value)])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        a = params.arguments or {}
        name = params.name
        if name == "add":
            return text(str(a["a"] + a["b"]))
        if name == "echo":
            return text(f"{args.name}: {a['text']}")
        if name == "sleep":
            await asyncio.sleep(float(a.get("seconds", 1)))
            return text("slept")
        if name == "crash":
            print("fatal: the crash tool was called", file=sys.stderr, flush=True)
            os._exit(3)
        if name == "fail":
            return types.CallToolResult(content=[types.TextContent(text="disk on fire")], is_error=True)
        if name == "big":
            return text("".join(f"line {i}: {'y' * 40}\n" for i in range(4600)) + "THE END")
        if name == "picture":
            return types.CallToolResult(content=[types.ImageContent(data="aGVsbG8=", mime_type="image/png")])
        if name == "liar":  # a line that is not JSON-RPC, then content off its schema
            os.write(1, b"this is not JSON-RPC\n")
            return types.CallToolResult(content=[types.TextContent(text="n is many")],
                                        structured_content={"n": "many"})
        if name == "grow":
            tools.append(types.Tool(name=f"extra{len(tools)}", description="Grown.",
                                    input_schema={"type": "object"}))
            await bus.publish(ToolsListChanged())  # the 2026 protocol's listen streams
            await ctx.session.send_tool_list_changed()  # servers of the handshake era
            return text("grown")
        if name == "whoami":
            return text(json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0),
                                    "marker": os.environ.get("TALARIA_AGENT"),
                                    "openai": os.environ.get("OPENAI_API_KEY"),
                                    "token": os.environ.get("DEMO_TOKEN"), "cwd": os.getcwd()}))
        return text(json.dumps(a, sort_keys=True))

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(
            name="hello", uri="note://hello", description="A note", mime_type="text/plain")])

    async def read_resource(ctx: Any, params: Any) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="text/plain", text=f"hello from {args.name}")])

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(
            name="greet", description="Greet someone",
            arguments=[types.PromptArgument(name="name", required=True)])])

    async def get_prompt(ctx: Any, params: Any) -> types.GetPromptResult:
        if params.name != "greet":
            raise ValueError(f"unknown prompt {params.name!r}")
        who = (params.arguments or {}).get("name", "nobody")
        return types.GetPromptResult(messages=[types.PromptMessage(
            role="user", content=types.TextContent(text=f"Write a haiku greeting {who}."))])

    return Server(args.name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt,
                  on_subscriptions_listen=ListenHandler(bus))


async def serve_stdio(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(server: Any, port: int, sse: bool) -> None:
    import uvicorn

    if sse:
        from mcp.server.sse import SseServerTransport
        from starlette.applications import Starlette
        from starlette.routing import Mount, Route

        transport = SseServerTransport("/messages/")

        async def handle(request: Any) -> Any:
            from starlette.responses import Response

            async with transport.connect_sse(request.scope, request.receive, request._send) as (r, w):
                await server.run(r, w, server.create_initialization_options())
            return Response()

        app = Starlette(routes=[Route("/sse", endpoint=handle, methods=["GET"]),
                                Mount("/messages/", app=transport.handle_post_message)])
    else:
        app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="demo")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--huge-schema", action="store_true")
    parser.add_argument("--lie", action="store_true")
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    args = parser.parse_args()
    if args.exit_at_start:
        print("error: no configuration found", file=sys.stderr, flush=True)
        sys.exit(2)
    if args.hang:
        time.sleep(3600)
    if args.delay:
        time.sleep(args.delay)
    server = build(args)
    if args.http or args.sse:
        serve_http(server, args.http or args.sse, sse=bool(args.sse))
    else:
        asyncio.run(serve_stdio(server))


if __name__ == "__main__":
    main()
