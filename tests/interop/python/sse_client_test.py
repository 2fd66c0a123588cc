#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK's HTTP+SSE client (`mcp.client.sse.sse_client`,
the transport of protocol 2024-11-05) against seawall.

    sse_client_test.py URL [--upstream NAME] [--mode auto|legacy] [--timeout SECS]

URL is seawall's `/sse` (names prefixed `<upstream>__`, default upstream `old`) or
`/mcp/<upstream>/sse` (pass `--upstream ""`), in front of upstreams that offer the demo
upstream's basics: tools echo, add and sleep (progress), the resource demo://readme and the
prompt greet. In mode `auto` (the SDK's default) the client first probes `server/discover`
on the stream; seawall answers it with an error before `initialize`, and the client falls
back to the handshake.

Prints one `ok   <check>` line per passed check and exits 0; on the first failure prints
`FAIL <check>: <why>` to stderr and exits 1. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import Client
from mcp.client.sse import sse_client

warnings.filterwarnings("ignore", category=DeprecationWarning)


class CheckFailed(Exception):
    pass


def need(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


def texts(content: list[Any]) -> list[str]:
    return [c.text for c in content if getattr(c, "type", None) == "text"]


async def main(args: argparse.Namespace) -> int:
    current = "setup"
    passed = 0

    async def check(name: str, fn: Callable[[], Awaitable[str | None]]) -> None:
        nonlocal current, passed
        current = name
        with anyio.fail_after(20):
            detail = await fn()
        passed += 1
        print(f"ok   {name}" + (f" ({detail})" if detail else ""), flush=True)

    def p(name: str) -> str:
        return f"{args.upstream}__{name}" if args.upstream else name

    try:
        with anyio.fail_after(args.timeout):
            async with Client(sse_client(args.url), mode=args.mode) as client:

                async def initialized() -> str:
                    need(client.protocol_version < "2026", f"negotiated {client.protocol_version}")
                    info = client.server_info
                    return f"protocol {client.protocol_version}, server {info.name if info else '?'}"

                await check(f"initialize over HTTP+SSE ({args.mode})", initialized)

                async def tools() -> str:
                    res = await client.list_tools()
                    names = [t.name for t in res.tools]
                    for base in ("echo", "add", "sleep"):
                        need(p(base) in names, f"{p(base)} missing from tools/list: {names}")
                    return f"{len(names)} tools"

                await check("tools/list", tools)

                async def echo() -> None:
                    res = await client.call_tool(p("echo"), {"message": "hello from python over sse"})
                    need(not res.is_error, f"isError: {res}")
                    need("hello from python over sse" in texts(res.content), f"unexpected echo: {res}")

                await check(f"tools/call {p('echo')}", echo)

                async def sleep_with_progress() -> str:
                    seen: list[float] = []

                    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                        seen.append(progress)

                    res = await client.call_tool(p("sleep"), {"ms": 400}, progress_callback=on_progress)
                    need(not res.is_error, f"isError: {res}")
                    need(len(seen) >= 1, f"no progress reached the client: {res}")
                    return f"{len(seen)} progress notifications"

                await check(f"tools/call {p('sleep')} with progress", sleep_with_progress)

                async def readme() -> None:
                    res = await client.read_resource("demo://readme")
                    need(len(res.contents) == 1 and str(res.contents[0].uri) == "demo://readme", f"bad contents: {res}")

                await check("resources/read demo://readme", readme)

                async def greet() -> None:
                    res = await client.get_prompt(p("greet"), {"name": "Ada"})
                    text = " ".join(getattr(m.content, "text", "") for m in res.messages)
                    need("Please greet Ada." in text, f"unexpected prompt: {res}")

                await check(f"prompts/get {p('greet')}", greet)
    except CheckFailed as e:
        print(f"FAIL {current}: {e}", file=sys.stderr)
        print(f"python sse client: {passed} checks passed before the failure", file=sys.stderr)
        return 1
    except BaseException as e:  # noqa: BLE001 — report whatever ended the run
        print(f"FAIL {current}: {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        print(f"python sse client: {passed} checks passed before the failure", file=sys.stderr)
        return 1
    print(f"python sse client: all {passed} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--upstream", default="old")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"])
    parser.add_argument("--timeout", type=float, default=90)
    sys.exit(anyio.run(main, parser.parse_args()))
