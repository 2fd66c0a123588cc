#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK client (PyPI `mcp`) against seawall.

    client_test.py URL [--stdio-upstream demo] [--http-upstream remote] [--mode legacy|auto]

URL is seawall's aggregate endpoint (`http://127.0.0.1:PORT/mcp`) fronting seawall's own
demo upstream twice: once as a stdio child (`--stdio-upstream`, default `demo`) and once
over Streamable HTTP (`--http-upstream`, default `remote`). Tools and prompts are expected
under `<upstream>__<name>`; resources keep their URIs. Pass an empty upstream name (`""`)
to drop the prefix, e.g. to aim the script at a single demo upstream directly.

Prints one `ok   <check>` line per passed check and exits 0; on the first failure prints
`FAIL <check>: <why>` to stderr and exits 1. Every wait is bounded (`--timeout`).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

# Sampling and ping are deprecated in 2026-07-28; this script speaks the handshake era on purpose.
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*2026-07-28.*")

SAMPLING_REPLY = "seawall-interop-sampled-reply"


class CheckFailed(Exception):
    pass


def need(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


def texts(content: list[Any]) -> list[str]:
    return [c.text for c in content if getattr(c, "type", None) == "text"]


def dump(obj: Any) -> str:
    try:
        s = obj.model_dump_json(by_alias=True, exclude_none=True)
    except Exception:
        s = repr(obj)
    return s if len(s) <= 600 else s[:600] + "..."


class Runner:
    def __init__(self) -> None:
        self.passed = 0
        self.current = ""

    def ok(self, detail: str = "") -> None:
        self.passed += 1
        print(f"ok   {self.current}" + (f" ({detail})" if detail else ""), flush=True)


def prefixed(upstream: str, name: str) -> str:
    return f"{upstream}__{name}" if upstream else name


async def run(args: argparse.Namespace, r: Runner) -> None:
    stdio, http = args.stdio_upstream, args.http_upstream
    upstreams = [u for u in dict.fromkeys([stdio, http])]

    sampling_requests: list[types.CreateMessageRequestParams] = []

    async def sampling_callback(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampling_requests.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLING_REPLY),
            model="seawall-interop-model",
            stop_reason="endTurn",
        )

    r.current = "initialize"
    client = Client(
        args.url,
        mode=args.mode,
        read_timeout_seconds=args.call_timeout,
        sampling_callback=sampling_callback,
        client_info=types.Implementation(name="seawall-interop-python", version="0.0.0"),
    )
    async with client:
        info = client.server_info
        r.ok(f"protocol {client.protocol_version}, server {info.name if info else '?'}")

        modern = client.protocol_version >= "2026"
        if not modern:  # ping is gone in 2026-07-28
            r.current = "ping"
            await client.send_ping()
            r.ok()

        r.current = "tools/list (aggregated, prefixed)"
        tools = await list_all_tools(client)
        names = {t.name for t in tools}
        for u in upstreams:
            for base in ("echo", "add", "sleep", "sample"):
                want = prefixed(u, base)
                need(want in names, f"{want!r} missing from tools/list: {sorted(names)}")
        r.ok(f"{len(names)} tools")

        for u in upstreams:
            r.current = f"tools/call {prefixed(u, 'echo')}"
            msg = f"hello from python via {u or 'direct'} ✓"
            res = await client.call_tool(prefixed(u, "echo"), {"message": msg})
            need(not res.is_error, f"isError result: {dump(res)}")
            need(any(msg in t for t in texts(res.content)), f"echo text missing {msg!r}: {dump(res)}")
            r.ok()

        for u in upstreams:
            r.current = f"tools/call {prefixed(u, 'add')} structuredContent"
            res = await client.call_tool(prefixed(u, "add"), {"a": 2, "b": 40})
            need(not res.is_error, f"isError result: {dump(res)}")
            sc = res.structured_content
            need(isinstance(sc, dict) and sc.get("sum") == 42, f"structuredContent.sum != 42: {dump(res)}")
            r.ok()

        r.current = "tools/call unknown tool -> JSON-RPC error"
        try:
            res = await client.call_tool(prefixed(stdio, "no_such_tool_xyz"), {})
            need(res.is_error, f"expected an error, got {dump(res)}")
            r.ok("isError result")
        except MCPError as e:
            r.ok(f"error {e.code}")

        r.current = f"tools/call {prefixed(stdio, 'fail')} -> isError"
        try:
            res = await client.call_tool(prefixed(stdio, "fail"), {})
            need(res.is_error, f"expected isError: true, got {dump(res)}")
            r.ok()
        except MCPError as e:
            raise CheckFailed(f"a failing tool must be an isError result, got JSON-RPC error {e.code}: {e}")

        r.current = "resources/list"
        resources = await client.list_resources()
        uris = {str(x.uri) for x in resources.resources}
        need("demo://readme" in uris, f"demo://readme missing from resources/list: {sorted(uris)}")
        r.ok(f"{len(uris)} resources")

        r.current = "resources/templates/list"
        templates = await client.list_resource_templates()
        tpls = {t.uri_template for t in templates.resource_templates}
        need("demo://echo/{text}" in tpls, f"demo://echo/{{text}} missing: {sorted(tpls)}")
        r.ok()

        r.current = "resources/read demo://readme"
        rr = await client.read_resource("demo://readme")
        need(len(rr.contents) > 0, f"no contents: {dump(rr)}")
        c0 = rr.contents[0]
        need(str(c0.uri) == "demo://readme", f"uri changed: {dump(rr)}")
        need(bool(getattr(c0, "text", "")), f"empty text: {dump(rr)}")
        r.ok(f"{len(c0.text)} chars")

        r.current = "resources/read demo://echo/interop (template)"
        rr = await client.read_resource("demo://echo/interop")
        need(len(rr.contents) > 0, f"no contents: {dump(rr)}")
        need("interop" in (getattr(rr.contents[0], "text", "") or ""), f"template text: {dump(rr)}")
        r.ok()

        r.current = "prompts/list"
        prompts = await client.list_prompts()
        pnames = {p.name for p in prompts.prompts}
        for u in upstreams:
            need(prefixed(u, "greet") in pnames, f"{prefixed(u, 'greet')!r} missing: {sorted(pnames)}")
        r.ok()

        r.current = f"prompts/get {prefixed(stdio, 'greet')}"
        gp = await client.get_prompt(prefixed(stdio, "greet"), {"name": "Ada"})
        need(len(gp.messages) > 0, f"no messages: {dump(gp)}")
        need(
            any("Ada" in (getattr(m.content, "text", "") or "") for m in gp.messages),
            f"prompt does not mention the argument: {dump(gp)}",
        )
        r.ok()

        for u in upstreams:
            r.current = f"tools/call {prefixed(u, 'sleep')} with progress"
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append((p, total, message))

            t0 = time.monotonic()
            res = await client.call_tool(prefixed(u, "sleep"), {"ms": 800}, progress_callback=on_progress)
            elapsed = time.monotonic() - t0
            need(not res.is_error, f"isError result: {dump(res)}")
            need(elapsed >= 0.7, f"sleep 800ms returned after {elapsed:.3f}s")
            need(len(progress) >= 1, "no notifications/progress arrived for a request with a progressToken")
            values = [p for p, _, _ in progress]
            need(values == sorted(values) and len(set(values)) == len(values), f"progress not increasing: {values}")
            r.ok(f"{len(progress)} progress notifications in {elapsed:.2f}s")

        for u in upstreams:
            r.current = f"tools/call {prefixed(u, 'sample')} with sampling relayed to the client"
            before = len(sampling_requests)
            res = await client.call_tool(prefixed(u, "sample"), {"prompt": f"interop prompt via {u or 'direct'}"})
            need(not res.is_error, f"isError result: {dump(res)}")
            need(len(sampling_requests) == before + 1, f"sampling callback ran {len(sampling_requests) - before} times")
            req = sampling_requests[-1]
            sent = " ".join(getattr(m.content, "text", "") or "" for m in req.messages)
            need(f"interop prompt via {u or 'direct'}" in sent, f"sampling request lost the prompt: {dump(req)}")
            joined = " ".join(texts(res.content))
            need(f"sampled: {SAMPLING_REPLY}" in joined, f"reply not relayed back: {dump(res)}")
            r.ok()

        r.current = "concurrent tools/call across upstreams"
        results: dict[str, Any] = {}

        async def call(name: str, n: int) -> None:
            results[f"{name}#{n}"] = await client.call_tool(name, {"message": f"c{n}"})

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(call, prefixed(upstreams[n % len(upstreams)], "echo"), n)
        for key, res in results.items():
            need(not res.is_error, f"{key}: {dump(res)}")
        need(len(results) == 8, f"only {len(results)} of 8 answered")
        for key, res in results.items():
            n = key.split("#")[1]
            need(any(f"c{n}" in t for t in texts(res.content)), f"{key} got someone else's answer: {dump(res)}")
        r.ok("8 calls")

        r.current = "close session"
    r.ok()


async def list_all_tools(client: Client) -> list[types.Tool]:
    out: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(50):
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        out.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return out
    raise CheckFailed("tools/list pagination did not end after 50 pages")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--stdio-upstream", default="demo", help="name of the stdio demo upstream (prefix)")
    ap.add_argument("--http-upstream", default="remote", help="name of the HTTP demo upstream (prefix)")
    ap.add_argument("--mode", default="legacy", help="Client mode: legacy (initialize handshake) or auto")
    ap.add_argument("--timeout", type=float, default=90.0, help="overall time limit, seconds")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="per-request time limit, seconds")
    args = ap.parse_args()

    r = Runner()
    try:
        _run_sync(args, r)
    except Exception as e:  # noqa: BLE001
        exc = e
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        why = str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TimeoutError):
            why = f"timed out (overall limit {args.timeout}s or per-call {args.call_timeout}s)"
        print(f"FAIL {r.current}: {why}", file=sys.stderr, flush=True)
        if not isinstance(exc, CheckFailed):
            traceback.print_exception(exc, file=sys.stderr)
        print(f"python client: {r.passed} checks passed before the failure", file=sys.stderr)
        return 1
    print(f"python client: all {r.passed} checks passed", flush=True)
    return 0


def _run_sync(args: argparse.Namespace, r: Runner) -> None:
    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, r)

    anyio.run(bounded)


if __name__ == "__main__":
    sys.exit(main())
