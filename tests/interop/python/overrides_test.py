#!/usr/bin/env python3
"""Interop check: the official MCP Python SDK client sees the tools seawall reshapes.

    overrides_test.py URL [--upstream demo] [--mode legacy|auto|2026-07-28] [--timeout SECS]

URL is a seawall endpoint in front of seawall's demo upstream configured as
tests/it/overrides.rs configures it: `add` shown as `plus_forty` (title, description,
`idempotentHint`, its argument `b` fixed at 40), `echo` as `say` (its `message` defaulting
to "nothing to say"), `fail` hidden. `--upstream demo` expects the names prefixed
`demo__` (the aggregate endpoint); `--upstream ""` expects them bare (`/mcp/demo`).
`--mode` is the client's era, as in client_test.py.

Prints one `ok   <check>` line per passed check and exits 0; on the first failure prints
`FAIL <check>: <why>` to stderr and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Awaitable, Callable

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

warnings.filterwarnings("ignore", category=DeprecationWarning)

INVALID_PARAMS = -32602


class CheckFailed(Exception):
    pass


def need(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


async def run(url: str, upstream: str, mode: str) -> int:
    name = (lambda n: f"{upstream}__{n}") if upstream else (lambda n: n)
    passed = 0

    async def check(what: str, fn: Callable[[], Awaitable[str]]) -> None:
        nonlocal passed
        try:
            detail = await fn()
        except CheckFailed as e:
            raise CheckFailed(f"{what}: {e}") from None
        passed += 1
        print(f"ok   {what} ({detail})", flush=True)

    async with Client(url, mode=mode, read_timeout_seconds=20) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}

        async def listed() -> str:
            need(name("plus_forty") in tools, f"plus_forty missing: {sorted(tools)}")
            need(name("add") not in tools, "the upstream's own name is listed")
            need(name("fail") not in tools, "the hidden tool is listed")
            plus = tools[name("plus_forty")]
            need(plus.title == "Plus forty", f"title {plus.title!r}")
            need(plus.description == "Adds forty to a.", f"description {plus.description!r}")
            need(plus.annotations is not None and plus.annotations.idempotent_hint is True, f"{plus.annotations}")
            schema = plus.input_schema
            need(set(schema.get("properties", {})) == {"a"}, f"schema properties {schema.get('properties')}")
            need(schema.get("required") == ["a"], f"schema required {schema.get('required')}")
            say = tools[name("say")].input_schema
            need(say["properties"]["message"].get("default") == "nothing to say", f"say schema {say}")
            need("message" not in say.get("required", []), f"say schema {say}")
            return f"{len(tools)} tools"

        async def renamed_call() -> str:
            res = await client.call_tool(name("plus_forty"), {"a": 2})
            need(not res.is_error, f"isError: {res}")
            need(res.structured_content == {"sum": 42}, f"structured content {res.structured_content}")
            return "2 + fixed 40 = 42"

        async def default_applied() -> str:
            res = await client.call_tool(name("say"), {})
            text = [c.text for c in res.content if getattr(c, "type", None) == "text"]
            need(text == ["nothing to say"], f"content {res.content}")
            return "the default reached the upstream"

        async def fixed_refused() -> str:
            try:
                res = await client.call_tool(name("plus_forty"), {"a": 2, "b": 1})
            except MCPError as e:
                need(e.code == INVALID_PARAMS, f"code {e.code}: {e}")
                need("set by the gateway" in str(e), f"message {e}")
                return f"error {e.code}"
            raise CheckFailed(f"a fixed argument was accepted: {res}")

        async def old_name_unknown() -> str:
            try:
                res = await client.call_tool(name("add"), {"a": 2, "b": 1})
            except MCPError as e:
                need(e.code == INVALID_PARAMS and "Unknown tool" in str(e), f"code {e.code}: {e}")
                return f"error {e.code}"
            raise CheckFailed(f"the upstream's own name was called: {res}")

        await check("tools/list shows the overrides", listed)
        await check("a renamed tool is called with its fixed argument", renamed_call)
        await check("a default fills an argument left out", default_applied)
        await check("a fixed argument sent by the client is -32602", fixed_refused)
        await check("the upstream's own name is unknown", old_name_unknown)
    return passed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--upstream", default="demo")
    ap.add_argument("--mode", default="legacy")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    async def bounded() -> int:
        with anyio.fail_after(args.timeout):
            return await run(args.url, args.upstream, args.mode)

    try:
        passed = anyio.run(bounded)
    except Exception as e:  # noqa: BLE001
        exc: BaseException = e
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        print(f"FAIL {exc if isinstance(exc, CheckFailed) else repr(exc)}", file=sys.stderr, flush=True)
        return 1
    print(f"python overrides client: {passed} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
