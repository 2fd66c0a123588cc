#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK's stdio client launching `seawall stdio`.

    stdio_client_test.py SEAWALL CONFIG [--stdio-upstream demo] [--http-upstream remote]
                         [--record NAME=FILE]... [--timeout SECS] [--call-timeout SECS]

SEAWALL is the seawall binary and CONFIG a configuration fronting seawall's own demo
upstream as a stdio child (`--stdio-upstream`, default `demo`) and over Streamable HTTP
(`--http-upstream`, default `remote`); an empty name leaves that upstream out. The SDK
(`mcp.client.stdio`, through `mcp.Client`) runs `SEAWALL stdio --config CONFIG` as its
server and sees every upstream at once: tools and prompts as `<upstream>__<name>`,
resources by their URIs. `--record NAME=FILE` names the demo's `--record` file of an
upstream, so the cancellation check can see that `notifications/cancelled` reached it.

Prints one `ok   <check>` line per passed check and exits 0; on the first failure prints
`FAIL <check>: <why>` to stderr and exits 1. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from client_test import ROOT_URI, SAMPLING_REPLY, CheckFailed, Runner, dump, list_all_tools, need, texts


def prefixed(upstream: str, name: str) -> str:
    return f"{upstream}__{name}"


def recorded(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


async def run(args: argparse.Namespace, r: Runner) -> None:
    upstreams = [u for u in dict.fromkeys([args.stdio_upstream, args.http_upstream]) if u]
    records = dict(item.split("=", 1) for item in args.record)

    sampling_requests: list[types.CreateMessageRequestParams] = []
    roots_requests: list[float] = []
    log_messages: list[types.LoggingMessageNotificationParams] = []

    async def sampling_callback(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampling_requests.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLING_REPLY),
            model="seawall-interop-model",
            stop_reason="endTurn",
        )

    async def list_roots_callback(context: Any) -> types.ListRootsResult:
        roots_requests.append(time.monotonic())
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="interop-root")])

    async def logging_callback(params: types.LoggingMessageNotificationParams) -> None:
        log_messages.append(params)

    server = StdioServerParameters(
        command=args.seawall,
        args=["stdio", "--config", args.config],
        env={"RUST_LOG": "info"},
    )
    r.current = "initialize"
    client = Client(
        server,
        mode="legacy",
        read_timeout_seconds=args.call_timeout,
        sampling_callback=sampling_callback,
        list_roots_callback=list_roots_callback,
        logging_callback=logging_callback,
        client_info=types.Implementation(name="seawall-interop-python-stdio", version="0.0.0"),
    )
    async with client:
        info = client.server_info
        need(info is not None and info.name == "seawall", f"serverInfo: {dump(info)}")
        print(f"ok   initialize over stdio (protocol {client.protocol_version}, server {info.name})", flush=True)
        r.passed += 1

        async def ping() -> None:
            await client.send_ping()

        await r.check("ping", ping)

        async def tools_list() -> str:
            names = {t.name for t in await list_all_tools(client)}
            for u in upstreams:
                for base in ("echo", "sleep", "sample", "roots", "log"):
                    need(prefixed(u, base) in names, f"{prefixed(u, base)!r} missing from tools/list: {sorted(names)}")
            return f"{len(names)} tools"

        await r.check("tools/list (aggregated, prefixed)", tools_list)

        for u in upstreams:

            async def echo(u: str = u) -> None:
                msg = f"hello over stdio via {u} ✓"
                res = await client.call_tool(prefixed(u, "echo"), {"message": msg})
                need(not res.is_error, f"isError result: {dump(res)}")
                need(any(msg in t for t in texts(res.content)), f"echo text missing {msg!r}: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'echo')}", echo)

            async def sleep_progress(u: str = u) -> str:
                progress: list[float] = []

                async def on_progress(p: float, total: float | None, message: str | None) -> None:
                    progress.append(p)

                res = await client.call_tool(prefixed(u, "sleep"), {"ms": 600}, progress_callback=on_progress)
                need(not res.is_error, f"isError result: {dump(res)}")
                need(len(progress) >= 1, "no notifications/progress arrived for a request with a progressToken")
                need(progress == sorted(progress) and len(set(progress)) == len(progress), f"not increasing: {progress}")
                return f"{len(progress)} progress notifications"

            await r.check(f"tools/call {prefixed(u, 'sleep')} with progress", sleep_progress)

            async def cancel(u: str = u) -> str:
                before = len(recorded(Path(records[u]))) if u in records else 0
                t0 = time.monotonic()
                with anyio.move_on_after(0.5) as scope:
                    await client.call_tool(prefixed(u, "sleep"), {"ms": 30000})
                need(scope.cancelled_caught, "the 30 s sleep finished before it was cancelled")
                # A call after the cancellation is answered at once: nothing is stuck.
                res = await client.call_tool(prefixed(u, "echo"), {"message": "after cancel"})
                need(not res.is_error and "after cancel" in texts(res.content), f"echo after cancel: {dump(res)}")
                need(time.monotonic() - t0 < 5, "the session was held up by the cancelled call")
                if u not in records:
                    return "no record file to check"
                with anyio.move_on_after(5):
                    while not any(e.get("event") == "cancelled" for e in recorded(Path(records[u]))[before:]):
                        await anyio.sleep(0.05)
                events = recorded(Path(records[u]))[before:]
                need(
                    any(e.get("event") == "cancelled" for e in events),
                    f"the upstream never saw notifications/cancelled: {events}",
                )
                return "the upstream saw notifications/cancelled"

            await r.check(f"tools/call {prefixed(u, 'sleep')} cancelled by the client", cancel)

        async def read_readme() -> str:
            rr = await client.read_resource("demo://readme")
            need(len(rr.contents) > 0, f"no contents: {dump(rr)}")
            need(str(rr.contents[0].uri) == "demo://readme", f"uri changed: {dump(rr)}")
            need(bool(getattr(rr.contents[0], "text", "")), f"empty text: {dump(rr)}")
            return f"{len(rr.contents[0].text)} chars"

        await r.check("resources/read demo://readme", read_readme)

        for u in upstreams:

            async def greet(u: str = u) -> None:
                gp = await client.get_prompt(prefixed(u, "greet"), {"name": "Ada"})
                need(
                    any("Ada" in (getattr(m.content, "text", "") or "") for m in gp.messages),
                    f"prompt does not mention the argument: {dump(gp)}",
                )

            await r.check(f"prompts/get {prefixed(u, 'greet')}", greet)

            async def sample(u: str = u) -> None:
                before = len(sampling_requests)
                res = await client.call_tool(prefixed(u, "sample"), {"prompt": f"stdio prompt via {u}"})
                need(not res.is_error, f"isError result: {dump(res)}")
                need(len(sampling_requests) == before + 1, f"sampling ran {len(sampling_requests) - before} times")
                need(f"sampled: {SAMPLING_REPLY}" in " ".join(texts(res.content)), f"reply not relayed: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'sample')} with sampling relayed over stdio", sample)

            async def roots(u: str = u) -> None:
                before = len(roots_requests)
                res = await client.call_tool(prefixed(u, "roots"), {})
                need(len(roots_requests) > before, "the roots/list request never reached the client")
                need(any(ROOT_URI in t for t in texts(res.content)), f"our root is not in the answer: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'roots')} with roots/list relayed over stdio", roots)

        async def set_level() -> None:
            await client.set_logging_level("debug")

        await r.check("logging/setLevel debug", set_level)

        for u in upstreams:

            async def log(u: str = u) -> None:
                text = f"stdio log line via {u}"
                res = await client.call_tool(prefixed(u, "log"), {"level": "warning", "message": text})
                need(not res.is_error, f"isError result: {dump(res)}")
                with anyio.move_on_after(3):
                    while not any(m.data == text for m in log_messages):
                        await anyio.sleep(0.02)
                got = [m for m in log_messages if m.data == text]
                need(len(got) == 1, f"log arrived {len(got)} times; all seen: {[m.data for m in log_messages]}")

            await r.check(f"tools/call {prefixed(u, 'log')} -> notifications/message", log)

        async def concurrent() -> str:
            results: dict[int, Any] = {}

            async def call(n: int) -> None:
                name = prefixed(upstreams[n % len(upstreams)], "echo")
                results[n] = await client.call_tool(name, {"message": f"concurrent-{n}-end"})

            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(call, n)
            for n, res in results.items():
                need(any(f"concurrent-{n}-end" in t for t in texts(res.content)), f"call {n}: {dump(res)}")
            need(len(results) == 8, f"only {len(results)} of 8 answered")
            return "8 calls"

        await r.check("concurrent tools/call across upstreams", concurrent)
        r.current = "close"
    print("ok   close (stdin closed, the SDK stopped the server)", flush=True)
    r.passed += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seawall")
    ap.add_argument("config")
    ap.add_argument("--stdio-upstream", default="demo", help="name of the stdio demo upstream ('' for none)")
    ap.add_argument("--http-upstream", default="remote", help="name of the HTTP demo upstream ('' for none)")
    ap.add_argument("--record", action="append", default=[], help="NAME=FILE: the demo's --record file")
    ap.add_argument("--timeout", type=float, default=90.0, help="overall time limit, seconds")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="per-request time limit, seconds")
    args = ap.parse_args()

    r = Runner([])

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, r)

    try:
        anyio.run(bounded)
    except Exception as e:  # noqa: BLE001
        exc: BaseException = e
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        why = str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TimeoutError):
            why = f"timed out (overall limit {args.timeout}s, per request {args.call_timeout}s)"
        print(f"FAIL {r.current}: {why}", file=sys.stderr, flush=True)
        if not isinstance(exc, (CheckFailed, TimeoutError)):
            traceback.print_exception(exc, file=sys.stderr)
        print(f"python stdio client: {r.passed} checks passed before the failure", file=sys.stderr)
        return 1
    print(f"python stdio client: all {r.passed} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
