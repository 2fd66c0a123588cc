#!/usr/bin/env node
// Interop check: the official MCP TypeScript SDK client (npm @modelcontextprotocol/sdk) over
// the HTTP+SSE transport of protocol 2024-11-05 (SSEClientTransport) against seawall, in
// front of upstreams that offer the demo upstream's basics: tools echo, add and sleep
// (progress), the resource demo://readme and the prompt greet.
//
//   node ts/sse_client_test.mjs URL [--upstream NAME]... [--sampling] [--transport sse|streamable]
//                              [--timeout SECS] [--call-timeout SECS]
//
// URL is what a user configures: seawall's `/sse` (every upstream, names prefixed
// `<upstream>__`), `/mcp/<upstream>/sse` (one upstream; pass `--upstream ""`), or `/mcp`.
// Every check runs once per `--upstream` (default `old`). `--sampling` also calls the demo's
// `sample` tool, whose sampling request must reach this client on the stream and its answer
// the upstream. `--transport streamable` runs the same checks with
// StreamableHTTPClientTransport instead (against `/mcp` or `/mcp/<upstream>`).
//
// Prints one `ok   <check>` line per passed check; on the first failure prints
// `FAIL <check>: <why>` to stderr and exits 1. Every request and the whole run are bounded.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const SAMPLING_REPLY = "seawall-interop-sampled-reply";

function parseArgs(argv) {
  const out = { url: undefined, upstreams: [], sampling: false, transport: "sse", timeout: 90, callTimeout: 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--upstream") out.upstreams.push(val());
    else if (a === "--sampling") out.sampling = true;
    else if (a === "--transport") out.transport = val();
    else if (a === "--timeout") out.timeout = Number(val());
    else if (a === "--call-timeout") out.callTimeout = Number(val());
    else if (a === "-h" || a === "--help") usage();
    else if (a.startsWith("--")) usage(`unknown option ${a}`);
    else if (out.url === undefined) out.url = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!out.url) usage("URL is required");
  if (!["sse", "streamable"].includes(out.transport)) usage(`unknown transport ${out.transport}`);
  if (out.upstreams.length === 0) out.upstreams.push("old");
  return out;
}

function usage(msg) {
  if (msg) console.error(`sse_client_test.mjs: ${msg}`);
  console.error(
    "usage: sse_client_test.mjs URL [--upstream NAME]... [--sampling] [--transport sse|streamable] [--timeout SECS]",
  );
  process.exit(2);
}

class CheckFailed extends Error {}
function need(cond, why) {
  if (!cond) throw new CheckFailed(why);
}
function dump(v) {
  const s = JSON.stringify(v);
  return s && s.length > 600 ? s.slice(0, 600) + "..." : s;
}
const texts = (content) => (content ?? []).filter((c) => c.type === "text").map((c) => c.text);

const args = parseArgs(process.argv.slice(2));
const opts = { timeout: args.callTimeout * 1000 };

let passed = 0;
let current = "setup";

const overall = setTimeout(() => {
  console.error(`FAIL ${current}: timed out (overall limit ${args.timeout}s)`);
  console.error(`ts sse client: ${passed} checks passed before the failure`);
  process.exit(1);
}, args.timeout * 1000);

async function check(name, fn) {
  current = name;
  const detail = await fn();
  passed++;
  console.log(`ok   ${name}${detail ? ` (${detail})` : ""}`);
}

async function checksFor(client, upstream) {
  const P = (name) => (upstream ? `${upstream}__${name}` : name);
  const on = upstream ? ` [${upstream}]` : "";

  await check(`tools/list${on}`, async () => {
    const res = await client.listTools(undefined, opts);
    const names = res.tools.map((t) => t.name);
    for (const base of ["echo", "add", "sleep"]) {
      need(names.includes(P(base)), `${P(base)} missing from tools/list: ${dump(names)}`);
    }
    return `${names.length} tools`;
  });

  await check(`tools/call ${P("echo")}`, async () => {
    const msg = "hello over HTTP+SSE ✓";
    const res = await client.callTool({ name: P("echo"), arguments: { message: msg } }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    need(texts(res.content).includes(msg), `unexpected echo: ${dump(res)}`);
  });

  await check(`tools/call ${P("add")}`, async () => {
    const res = await client.callTool({ name: P("add"), arguments: { a: 2, b: 40 } }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    need(texts(res.content).some((t) => t.startsWith("42")), `unexpected sum: ${dump(res)}`);
  });

  await check(`tools/call ${P("sleep")} with progress`, async () => {
    const progress = [];
    const res = await client.callTool({ name: P("sleep"), arguments: { ms: 400 } }, undefined, {
      ...opts,
      onprogress: (p) => progress.push(p),
    });
    need(!res.isError, `isError: ${dump(res)}`);
    need(progress.length >= 1, `no progress notification reached the client: ${dump(res)}`);
    const values = progress.map((p) => p.progress);
    need(values.every((v, i) => i === 0 || v > values[i - 1]), `progress not increasing: ${dump(values)}`);
    return `${progress.length} progress notifications`;
  });

  await check(`resources/read demo://readme${on}`, async () => {
    const res = await client.readResource({ uri: "demo://readme" }, opts);
    need(res.contents.length === 1 && res.contents[0].uri === "demo://readme", `bad contents: ${dump(res)}`);
    need((res.contents[0].text ?? "").length > 0, `empty text: ${dump(res)}`);
  });

  await check(`prompts/get ${P("greet")}`, async () => {
    const res = await client.getPrompt({ name: P("greet"), arguments: { name: "Ada" } }, opts);
    const t = res.messages.map((m) => m.content?.text ?? "").join(" ");
    need(t.includes("Please greet Ada."), `unexpected prompt: ${dump(res)}`);
  });

  await check(`concurrent tools/call${on}`, async () => {
    const calls = Array.from({ length: 8 }, (_, n) =>
      client.callTool({ name: P("echo"), arguments: { message: `c${n}` } }, undefined, opts),
    );
    const results = await Promise.all(calls);
    results.forEach((res, n) => need(texts(res.content).includes(`c${n}`), `call ${n} got ${dump(res)}`));
    return "8 calls";
  });

  if (args.sampling) {
    await check(`tools/call ${P("sample")} with sampling relayed over the stream`, async () => {
      const res = await client.callTool({ name: P("sample"), arguments: { prompt: "from ts over sse" } }, undefined, opts);
      need(!res.isError, `isError: ${dump(res)}`);
      need(texts(res.content).some((t) => t.includes(SAMPLING_REPLY)), `reply not relayed back: ${dump(res)}`);
    });
  }
}

async function main() {
  const sampled = [];
  const client = new Client({ name: "seawall-interop-ts-sse", version: "0.0.0" }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    sampled.push(req.params);
    return {
      role: "assistant",
      content: { type: "text", text: SAMPLING_REPLY },
      model: "seawall-interop-model",
      stopReason: "endTurn",
    };
  });
  client.onerror = (e) => console.error(`(client transport error: ${e?.message ?? e})`);
  const url = new URL(args.url);
  const transport = args.transport === "sse" ? new SSEClientTransport(url) : new StreamableHTTPClientTransport(url);

  await check(`initialize over ${args.transport}`, async () => {
    await client.connect(transport, opts);
    const v = client.getServerVersion();
    need(v && v.name, `no serverInfo: ${dump(v)}`);
    return `server ${v.name}`;
  });

  await check("ping", async () => {
    await client.ping(opts);
  });

  for (const upstream of args.upstreams) {
    await checksFor(client, upstream);
  }

  await check("close", async () => {
    await client.close();
  });
}

try {
  await main();
  clearTimeout(overall);
  console.log(`ts sse client: all ${passed} checks passed`);
  process.exit(0);
} catch (e) {
  clearTimeout(overall);
  const why = e instanceof CheckFailed ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}`;
  console.error(`FAIL ${current}: ${why}`);
  if (!(e instanceof CheckFailed) && e?.stack) console.error(e.stack);
  console.error(`ts sse client: ${passed} checks passed before the failure`);
  process.exit(1);
}
