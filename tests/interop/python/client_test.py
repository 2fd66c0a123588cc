#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK client (PyPI `mcp`) against seawall.

    client_test.py URL [--stdio-upstream demo] [--http-upstream remote]
                       [--mode legacy|auto|2026-07-28] [--expect-protocol VERSION]
                       [--direct] [--skip SUBSTRING]... [--timeout SECS] [--call-timeout SECS]

URL is seawall's aggregate endpoint (`http://127.0.0.1:PORT/mcp`) fronting seawall's own
demo upstream twice: once as a per-session stdio child (`--stdio-upstream`, default `demo`)
and once over Streamable HTTP (`--http-upstream`, default `remote`). Tools and prompts are
expected under `<upstream>__<name>`; resources keep their URIs. An empty upstream name
(`""`) drops the prefix, e.g. to aim the script at one demo upstream directly (add
`--direct` then: it skips what only the gateway does, i.e. rewriting tool failures into
sanitised isError results).

Prints one `ok   <check>` line per passed check and exits 0; on the first failure prints
`FAIL <check>: <why>` to stderr and exits 1. `--skip` drops every check whose name contains
the given text (and says so). Every wait is bounded.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

# Sampling, roots, logging and ping are deprecated in 2026-07-28; this script speaks the
# handshake era on purpose (and copes with `--mode auto`).
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*2026-07-28.*")

SAMPLING_REPLY = "seawall-interop-sampled-reply"
ROOT_URI = "file:///tmp/seawall-interop-root"

# Fragments of the demo's deliberately leaky failure (src/demo/tools.rs) that must never
# reach a client through seawall: credentials, an internal address, file system paths.
LEAKS = ["sk-live-4f9a8b7c", "10.0.3.7", "/home/deploy", "eyJhbGciOiJIUzI1NiJ9", "/srv/app/"]


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
    except Exception:  # noqa: BLE001
        s = repr(obj)
    return s if len(s) <= 600 else s[:600] + "..."


def prefixed(upstream: str, name: str) -> str:
    return f"{upstream}__{name}" if upstream else name


class Runner:
    def __init__(self, skip: list[str]) -> None:
        self.passed = 0
        self.skipped = 0
        self.current = "setup"
        self.skip = skip

    async def check(self, name: str, fn: Callable[[], Awaitable[str | None]]) -> None:
        self.current = name
        if any(s in name for s in self.skip):
            self.skipped += 1
            print(f"skip {name} (--skip)", flush=True)
            return
        detail = await fn()
        self.passed += 1
        print(f"ok   {name}" + (f" ({detail})" if detail else ""), flush=True)


async def run(args: argparse.Namespace, r: Runner) -> None:
    stdio, http = args.stdio_upstream, args.http_upstream
    upstreams = list(dict.fromkeys([stdio, http]))

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

    r.current = "initialize"
    client = Client(
        args.url,
        mode=args.mode,
        read_timeout_seconds=args.call_timeout,
        sampling_callback=sampling_callback,
        list_roots_callback=list_roots_callback,
        logging_callback=logging_callback,
        client_info=types.Implementation(name="seawall-interop-python", version="0.0.0"),
    )
    async with client:
        info = client.server_info
        print(f"ok   initialize (protocol {client.protocol_version}, server {info.name if info else '?'})", flush=True)
        r.passed += 1
        if args.expect_protocol and client.protocol_version != args.expect_protocol:
            raise CheckFailed(f"negotiated {client.protocol_version}, expected {args.expect_protocol}")
        modern = client.protocol_version >= "2026"

        async def ping() -> None:
            await client.send_ping()

        if not modern:  # ping is gone in 2026-07-28
            await r.check("ping", ping)

        async def tools_list() -> str:
            names = {t.name for t in await list_all_tools(client)}
            for u in upstreams:
                for base in ("echo", "add", "sleep", "fail", "sample", "roots", "log"):
                    want = prefixed(u, base)
                    need(want in names, f"{want!r} missing from tools/list: {sorted(names)}")
            return f"{len(names)} tools"

        await r.check("tools/list (aggregated, prefixed)", tools_list)

        for u in upstreams:

            async def echo(u: str = u) -> None:
                msg = f"hello from python via {u or 'direct'} ✓"
                res = await client.call_tool(prefixed(u, "echo"), {"message": msg})
                need(not res.is_error, f"isError result: {dump(res)}")
                need(any(msg in t for t in texts(res.content)), f"echo text missing {msg!r}: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'echo')}", echo)

        for u in upstreams:

            async def add(u: str = u) -> None:
                res = await client.call_tool(prefixed(u, "add"), {"a": 2, "b": 40})
                need(not res.is_error, f"isError result: {dump(res)}")
                sc = res.structured_content
                need(isinstance(sc, dict) and sc.get("sum") == 42, f"structuredContent.sum != 42: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'add')} structuredContent", add)

        async def unknown_tool() -> str:
            try:
                res = await client.call_tool(prefixed(stdio, "no_such_tool_xyz"), {})
            except MCPError as e:
                return f"error {e.code}"
            need(res.is_error, f"expected an error, got {dump(res)}")
            return "isError result"

        await r.check("tools/call unknown tool -> error", unknown_tool)

        for u in upstreams:
            for mode in ("error", "result"):
                # The demo fails like a careless server: a traceback with paths, an internal
                # address and credentials, as a JSON-RPC -32603 (mode=error) or as an isError
                # result (mode=result). Through seawall both must arrive as an isError result
                # with none of that leaked (DESIGN.md §5).
                async def fail(u: str = u, mode: str = mode) -> None:
                    try:
                        res = await client.call_tool(prefixed(u, "fail"), {"mode": mode})
                        need(res.is_error, f"expected isError: true, got {dump(res)}")
                        said = " ".join(texts(res.content))
                    except MCPError as e:
                        if not args.direct:
                            raise CheckFailed(
                                f"a failing tool must be an isError result, got JSON-RPC error {e.code}: "
                                f"{str(e)[:300]!r}"
                            ) from None
                        said = str(e)
                    if not args.direct:
                        leaked = [s for s in LEAKS if s in said]
                        need(not leaked, f"upstream secrets/paths leaked to the client: {leaked} in {said!r}")

                await r.check(f"tools/call {prefixed(u, 'fail')} mode={mode} -> sanitised isError", fail)

        async def resources_list() -> str:
            resources = await client.list_resources()
            uris = {str(x.uri) for x in resources.resources}
            need("demo://readme" in uris, f"demo://readme missing from resources/list: {sorted(uris)}")
            return f"{len(uris)} resources"

        await r.check("resources/list", resources_list)

        async def templates_list() -> None:
            templates = await client.list_resource_templates()
            tpls = {t.uri_template for t in templates.resource_templates}
            need("demo://echo/{text}" in tpls, f"demo://echo/{{text}} missing: {sorted(tpls)}")

        await r.check("resources/templates/list", templates_list)

        async def read_readme() -> str:
            rr = await client.read_resource("demo://readme")
            need(len(rr.contents) > 0, f"no contents: {dump(rr)}")
            c0 = rr.contents[0]
            need(str(c0.uri) == "demo://readme", f"uri changed: {dump(rr)}")
            need(bool(getattr(c0, "text", "")), f"empty text: {dump(rr)}")
            return f"{len(c0.text)} chars"

        await r.check("resources/read demo://readme", read_readme)

        async def read_template() -> None:
            rr = await client.read_resource("demo://echo/interop%20check")
            need(len(rr.contents) > 0, f"no contents: {dump(rr)}")
            need(getattr(rr.contents[0], "text", None) == "interop check", f"template text: {dump(rr)}")

        await r.check("resources/read demo://echo/interop%20check (template)", read_template)

        async def prompts_list() -> None:
            prompts = await client.list_prompts()
            pnames = {p.name for p in prompts.prompts}
            for u in upstreams:
                need(prefixed(u, "greet") in pnames, f"{prefixed(u, 'greet')!r} missing: {sorted(pnames)}")

        await r.check("prompts/list", prompts_list)

        for u in upstreams:

            async def greet(u: str = u) -> None:
                gp = await client.get_prompt(prefixed(u, "greet"), {"name": "Ada"})
                need(len(gp.messages) > 0, f"no messages: {dump(gp)}")
                need(
                    any("Ada" in (getattr(m.content, "text", "") or "") for m in gp.messages),
                    f"prompt does not mention the argument: {dump(gp)}",
                )

            await r.check(f"prompts/get {prefixed(u, 'greet')}", greet)

        for u in upstreams:

            async def sleep_progress(u: str = u) -> str:
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
                return f"{len(progress)} progress notifications in {elapsed:.2f}s"

            await r.check(f"tools/call {prefixed(u, 'sleep')} with progress", sleep_progress)

        for u in upstreams:

            async def sample(u: str = u) -> None:
                before = len(sampling_requests)
                prompt = f"interop prompt via {u or 'direct'}"
                res = await client.call_tool(prefixed(u, "sample"), {"prompt": prompt})
                need(not res.is_error, f"isError result: {dump(res)}")
                need(
                    len(sampling_requests) == before + 1,
                    f"sampling callback ran {len(sampling_requests) - before} times",
                )
                req = sampling_requests[-1]
                sent = " ".join(getattr(m.content, "text", "") or "" for m in req.messages)
                need(prompt in sent, f"sampling request lost the prompt: {dump(req)}")
                need(f"sampled: {SAMPLING_REPLY}" in " ".join(texts(res.content)), f"reply not relayed: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'sample')} with sampling relayed to the client", sample)

        for u in upstreams:

            async def roots(u: str = u) -> None:
                before = len(roots_requests)
                res = await client.call_tool(prefixed(u, "roots"), {})
                need(not res.is_error, f"isError result: {dump(res)}")
                need(len(roots_requests) > before, "the roots/list request never reached the client")
                need(any(ROOT_URI in t for t in texts(res.content)), f"our root is not in the answer: {dump(res)}")

            await r.check(f"tools/call {prefixed(u, 'roots')} with roots/list relayed to the client", roots)

        if not modern:  # logging/setLevel is the handshake era's opt-in

            async def set_level() -> None:
                await client.set_logging_level("debug")

            await r.check("logging/setLevel debug", set_level)

            for u in upstreams:

                async def log(u: str = u) -> None:
                    text = f"interop log line via {u or 'direct'}"
                    res = await client.call_tool(prefixed(u, "log"), {"level": "warning", "message": text})
                    need(not res.is_error, f"isError result: {dump(res)}")
                    with anyio.move_on_after(3):
                        while not any(m.data == text for m in log_messages):
                            await anyio.sleep(0.02)
                    got = [m for m in log_messages if m.data == text]
                    need(len(got) == 1, f"log arrived {len(got)} times; all seen: {[m.data for m in log_messages]}")
                    need(got[0].level == "warning", f"level changed: {dump(got[0])}")

                await r.check(f"tools/call {prefixed(u, 'log')} -> notifications/message", log)

        async def concurrent() -> str:
            results: dict[int, Any] = {}

            async def call(n: int) -> None:
                name = prefixed(upstreams[n % len(upstreams)], "echo")
                results[n] = await client.call_tool(name, {"message": f"concurrent-{n}-end"})

            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(call, n)
            need(len(results) == 8, f"only {len(results)} of 8 answered")
            for n, res in results.items():
                need(not res.is_error, f"call {n}: {dump(res)}")
                need(
                    any(f"concurrent-{n}-end" in t for t in texts(res.content)),
                    f"call {n} got someone else's answer: {dump(res)}",
                )
            return "8 calls"

        await r.check("concurrent tools/call across upstreams", concurrent)
        r.current = "close session"
    print("ok   close session", flush=True)
    r.passed += 1


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
    ap.add_argument("--stdio-upstream", default="demo", help="name (prefix) of the stdio demo upstream")
    ap.add_argument("--http-upstream", default="remote", help="name (prefix) of the HTTP demo upstream")
    ap.add_argument(
        "--mode",
        default="legacy",
        help="Client mode: legacy (initialize handshake), auto (server/discover first), or a modern version",
    )
    ap.add_argument("--expect-protocol", default="", help="fail unless this protocol version is negotiated")
    ap.add_argument(
        "--direct",
        action="store_true",
        help="talking to the demo upstream itself, not seawall: skip the gateway-only expectations",
    )
    ap.add_argument("--skip", action="append", default=[], help="skip checks whose name contains this")
    ap.add_argument("--timeout", type=float, default=90.0, help="overall time limit, seconds")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="per-request time limit, seconds")
    args = ap.parse_args()

    r = Runner(args.skip)

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
        print(f"python client: {r.passed} checks passed before the failure", file=sys.stderr)
        return 1
    skipped = f", {r.skipped} skipped" if r.skipped else ""
    print(f"python client: all {r.passed} checks passed{skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
