#!/usr/bin/env python3
"""An MCP server on the official Python SDK's HTTP+SSE transport (protocol 2024-11-05).

    sse_server.py

Serves `GET /sse` (the event stream, whose `endpoint` event names `/messages/?session_id=...`)
on 127.0.0.1 and a free port, and prints `LISTENING <port>` on stderr once bound. It offers
what seawall's interop clients check, named like the demo upstream's: tools `echo`
(`message` back), `add` (`a` + `b`) and `sleep` (`ms`, with progress when asked), the
resource `demo://readme` and the prompt `greet` (`name`).
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("seawall-interop-python-sse")


@server.tool()
def echo(message: str) -> str:
    """Return `message` unchanged."""
    return message


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
async def sleep(ms: int, ctx: Context) -> str:
    """Wait `ms` milliseconds in four steps, reporting progress after each."""
    steps = 4
    for step in range(1, steps + 1):
        await anyio.sleep(ms / 1000 / steps)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"slept {ms} ms"


@server.resource("demo://readme", mime_type="text/markdown")
def readme() -> str:
    """A short text."""
    return "# Python SSE server\nServed over HTTP+SSE.\n"


@server.prompt()
def greet(name: str) -> str:
    """Ask the model to greet someone."""
    return f"Please greet {name}."


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = server.sse_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    print(f"LISTENING {port}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
