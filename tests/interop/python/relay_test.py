#!/usr/bin/env python3
"""The official Python SDK client's relays, in one connect mode, against one endpoint.

    relay_test.py URL [--mode auto|legacy] [--prefix PREFIX]

Connects `mcp.Client(URL)` in the given mode (`auto`, the SDK's default, speaks
2026-07-28 to a server that offers it; `legacy` keeps to the initialize handshake) and
checks every relay a gateway carries between the server's tools and the client's
callbacks, against `ts/conformance_server.mjs` (tool names after PREFIX):

* sampling: `test_sampling` asks the client for a completion; the callback runs and the
  tool's result quotes the callback's answer;
* elicitation: `test_elicitation` asks for a form; the callback runs and the result
  quotes the accepted content;
* progress: `test_tool_with_progress` reports progress; the callback sees it, increasing;
* logging: `test_tool_with_logging` logs at info; the logging callback sees the messages
  (the client asks for `debug` and up).

Prints one `ok`/`FAIL` line per check and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import mcp_types as types
from mcp import Client

REPLY = "relay-test-completion"
FORM = {"username": "relay", "email": "relay@example.com"}


async def run(args: argparse.Namespace) -> int:
    seen: dict[str, list[Any]] = {"sampling": [], "elicitation": [], "progress": [], "logging": []}

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen["sampling"].append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=REPLY), model="relay", stop_reason="endTurn"
        )

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        seen["elicitation"].append(params)
        return types.ElicitResult(action="accept", content=FORM)

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        seen["logging"].append(params)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen["progress"].append(value)

    failed = 0

    def check(name: str, ok: bool, detail: str) -> None:
        nonlocal failed
        print(f"{'ok  ' if ok else 'FAIL'} [{args.mode}] {name}: {detail}", flush=True)
        failed += 0 if ok else 1

    def text_of(result: types.CallToolResult) -> str:
        return " ".join(getattr(c, "text", "") for c in result.content)

    client = Client(
        args.url,
        mode=args.mode,
        read_timeout_seconds=args.call_timeout,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        logging_callback=logging,
        log_level="debug",
        client_info=types.Implementation(name="seawall-relay-test", version="0.0.0"),
    )
    async with client:
        print(f"connected [{args.mode}]: protocol {client.protocol_version}", flush=True)
        p = args.prefix

        async def call(name: str, arguments: dict[str, Any], **kw: Any) -> types.CallToolResult | None:
            try:
                return await client.call_tool(p + name, arguments, **kw)
            except Exception as e:  # noqa: BLE001 - reported as a failed check
                check(name, False, f"raised {e!r}"[:300])
                return None

        r = await call("test_sampling", {"prompt": "say something"})
        if r is not None:
            check("sampling", len(seen["sampling"]) == 1 and REPLY in text_of(r) and not r.is_error,
                  f"callback ran {len(seen['sampling'])}x; result {text_of(r)[:120]!r}")
        r = await call("test_elicitation", {"message": "who are you?"})
        if r is not None:
            check("elicitation", len(seen["elicitation"]) == 1 and FORM["email"] in text_of(r) and not r.is_error,
                  f"callback ran {len(seen['elicitation'])}x; result {text_of(r)[:120]!r}")
        r = await call("test_tool_with_progress", {}, progress_callback=progress)
        if r is not None:
            values = seen["progress"]
            check("progress", len(values) >= 2 and values == sorted(values) and not r.is_error,
                  f"progress seen {values}")
        r = await call("test_tool_with_logging", {})
        if r is not None:
            check("logging", len(seen["logging"]) >= 1 and not r.is_error, f"{len(seen['logging'])} log messages")
    return failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--mode", default="auto", help="the Client's connect mode (auto is the SDK's default)")
    ap.add_argument("--prefix", default="", help="prefix of the tool names (seawall's aggregate endpoint)")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="per-request time limit, seconds")
    args = ap.parse_args()
    failed = asyncio.run(run(args))
    print(f"{'all passed' if not failed else f'{failed} failed'} [{args.mode}]")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
