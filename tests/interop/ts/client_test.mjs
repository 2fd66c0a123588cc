#!/usr/bin/env node
// Interop check: the official MCP TypeScript SDK client (npm @modelcontextprotocol/sdk,
// StreamableHTTPClientTransport) against seawall fronting the reference server
// @modelcontextprotocol/server-everything as an HTTP upstream.
//
//   node ts/client_test.mjs URL [--upstream everything] [--skip SUBSTRING]... [--timeout SECS]
//
// URL is seawall's aggregate endpoint (http://127.0.0.1:PORT/mcp): tools and prompts are
// expected as `<upstream>__<name>`, resources by their own URIs. `--upstream ""` drops the
// prefix, so the same script runs directly against server-everything (or against
// seawall's single-upstream endpoint /mcp/<upstream>).
//
// Prints one `ok   <check>` line per passed check; on the first failure prints
// `FAIL <check>: <why>` to stderr and exits 1. Every request and the whole run are bounded.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const SAMPLING_REPLY = "seawall-interop-sampled-reply";
const ROOT_URI = "file:///tmp/seawall-interop-root";

function parseArgs(argv) {
  const out = { url: undefined, upstream: "everything", skip: [], timeout: 90, callTimeout: 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--upstream") out.upstream = val();
    else if (a === "--skip") out.skip.push(val());
    else if (a === "--timeout") out.timeout = Number(val());
    else if (a === "--call-timeout") out.callTimeout = Number(val());
    else if (a === "-h" || a === "--help") usage();
    else if (a.startsWith("--")) usage(`unknown option ${a}`);
    else if (out.url === undefined) out.url = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!out.url) usage("URL is required");
  return out;
}

function usage(msg) {
  if (msg) console.error(`client_test.mjs: ${msg}`);
  console.error("usage: client_test.mjs URL [--upstream NAME] [--skip SUBSTRING]... [--timeout SECS] [--call-timeout SECS]");
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
const P = (name) => (args.upstream ? `${args.upstream}__${name}` : name);
const opts = { timeout: args.callTimeout * 1000 };

let passed = 0;
let current = "setup";
const skipped = [];

const overall = setTimeout(() => {
  console.error(`FAIL ${current}: timed out (overall limit ${args.timeout}s)`);
  console.error(`ts client: ${passed} checks passed before the failure`);
  process.exit(1);
}, args.timeout * 1000);

async function check(name, fn) {
  current = name;
  if (args.skip.some((s) => name.includes(s))) {
    skipped.push(name);
    console.log(`skip ${name} (--skip)`);
    return;
  }
  const detail = await fn();
  passed++;
  console.log(`ok   ${name}${detail ? ` (${detail})` : ""}`);
}

async function main() {
  const samplingRequests = [];
  const rootsRequests = [];
  const logMessages = [];

  const client = new Client(
    { name: "seawall-interop-ts", version: "0.0.0" },
    { capabilities: { sampling: {}, roots: { listChanged: true } } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    samplingRequests.push(req.params);
    return {
      role: "assistant",
      content: { type: "text", text: SAMPLING_REPLY },
      model: "seawall-interop-model",
      stopReason: "endTurn",
    };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    rootsRequests.push(Date.now());
    return { roots: [{ uri: ROOT_URI, name: "interop-root" }] };
  });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logMessages.push(n.params);
  });
  client.onerror = (e) => console.error(`(client transport error: ${e?.message ?? e})`);

  const transport = new StreamableHTTPClientTransport(new URL(args.url));

  await check("initialize", async () => {
    await client.connect(transport, opts);
    const v = client.getServerVersion();
    need(v && v.name, `no serverInfo: ${dump(v)}`);
    need(transport.sessionId, "no Mcp-Session-Id was issued");
    return `protocol ${transport.protocolVersion ?? "?"}, server ${v.name}`;
  });

  await check("ping", async () => {
    await client.ping(opts);
  });

  let toolNames = new Set();
  await check("tools/list", async () => {
    let cursor;
    const tools = [];
    for (let page = 0; page < 50; page++) {
      const res = await client.listTools(cursor ? { cursor } : undefined, opts);
      tools.push(...res.tools);
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    need(!cursor, "tools/list pagination did not end after 50 pages");
    toolNames = new Set(tools.map((t) => t.name));
    for (const base of ["echo", "get-sum", "get-structured-content", "trigger-long-running-operation", "get-tiny-image"]) {
      need(toolNames.has(P(base)), `${P(base)} missing from tools/list: ${dump([...toolNames].sort())}`);
    }
    const sum = tools.find((t) => t.name === P("get-sum"));
    need(sum.inputSchema?.properties?.a, `get-sum lost its inputSchema: ${dump(sum)}`);
    need(sum.annotations?.readOnlyHint === true, `get-sum lost its annotations: ${dump(sum)}`);
    return `${toolNames.size} tools`;
  });

  await check("tools/list has the client-capability tools (sampling, roots)", async () => {
    for (const base of ["trigger-sampling-request", "get-roots-list"]) {
      need(
        toolNames.has(P(base)),
        `${P(base)} missing: server-everything registers it only when the client declared ` +
          `the capability, so it was not forwarded upstream. Tools: ${dump([...toolNames].sort())}`,
      );
    }
  });

  await check(`tools/call ${P("echo")}`, async () => {
    const msg = "hello from the TypeScript SDK ✓";
    const res = await client.callTool({ name: P("echo"), arguments: { message: msg } }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    need(texts(res.content).some((t) => t === `Echo: ${msg}`), `unexpected echo: ${dump(res)}`);
  });

  await check(`tools/call ${P("get-sum")}`, async () => {
    const res = await client.callTool({ name: P("get-sum"), arguments: { a: 2, b: 40 } }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    need(texts(res.content).some((t) => t.includes("is 42")), `unexpected sum: ${dump(res)}`);
  });

  await check(`tools/call ${P("get-structured-content")} (outputSchema validated by the SDK)`, async () => {
    const res = await client.callTool(
      { name: P("get-structured-content"), arguments: { location: "New York" } },
      undefined,
      opts,
    );
    need(!res.isError, `isError: ${dump(res)}`);
    need(res.structuredContent?.temperature === 33, `structuredContent: ${dump(res)}`);
  });

  await check(`tools/call ${P("get-tiny-image")} (image content)`, async () => {
    const res = await client.callTool({ name: P("get-tiny-image"), arguments: {} }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    const img = res.content.find((c) => c.type === "image");
    need(img && img.mimeType === "image/png" && img.data.length > 100, `no PNG image: ${dump(res)}`);
  });

  await check(`tools/call ${P("get-sum")} with invalid arguments -> error`, async () => {
    try {
      const res = await client.callTool({ name: P("get-sum"), arguments: { a: "x" } }, undefined, opts);
      need(res.isError === true, `expected an error, got ${dump(res)}`);
      return "isError result";
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      need(typeof e.code === "number", `unexpected exception ${e}`);
      return `JSON-RPC error ${e.code}`;
    }
  });

  await check("tools/call unknown tool -> error", async () => {
    try {
      const res = await client.callTool({ name: P("no-such-tool-xyz"), arguments: {} }, undefined, opts);
      need(res.isError === true, `expected an error, got ${dump(res)}`);
      return "isError result";
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      need(typeof e.code === "number", `unexpected exception ${e}`);
      return `JSON-RPC error ${e.code}`;
    }
  });

  await check(`tools/call ${P("trigger-long-running-operation")} with progress`, async () => {
    const progress = [];
    const t0 = Date.now();
    const res = await client.callTool(
      { name: P("trigger-long-running-operation"), arguments: { duration: 1, steps: 4 } },
      undefined,
      { ...opts, onprogress: (p) => progress.push(p) },
    );
    need(!res.isError, `isError: ${dump(res)}`);
    need(progress.length === 4, `expected 4 progress notifications, got ${progress.length}: ${dump(progress)}`);
    need(
      progress.every((p, i) => p.progress === i + 1 && p.total === 4),
      `progress values wrong: ${dump(progress)}`,
    );
    return `${progress.length} progress notifications in ${Date.now() - t0} ms`;
  });

  await check(`tools/call ${P("trigger-sampling-request")} with sampling relayed to the client`, async () => {
    const before = samplingRequests.length;
    const res = await client.callTool(
      { name: P("trigger-sampling-request"), arguments: { prompt: "interop prompt from ts", maxTokens: 20 } },
      undefined,
      opts,
    );
    need(!res.isError, `isError: ${dump(res)}`);
    need(samplingRequests.length === before + 1, `sampling handler ran ${samplingRequests.length - before} times`);
    const sent = samplingRequests.at(-1).messages.map((m) => m.content?.text ?? "").join(" ");
    need(sent.includes("interop prompt from ts"), `sampling request lost the prompt: ${dump(samplingRequests.at(-1))}`);
    need(texts(res.content).some((t) => t.includes(SAMPLING_REPLY)), `reply not relayed back: ${dump(res)}`);
  });

  await check(`tools/call ${P("get-roots-list")} with roots/list relayed to the client`, async () => {
    const res = await client.callTool({ name: P("get-roots-list"), arguments: {} }, undefined, opts);
    need(!res.isError, `isError: ${dump(res)}`);
    need(
      texts(res.content).some((t) => t.includes(ROOT_URI)),
      `our root is not in the answer (roots/list requests seen: ${rootsRequests.length}): ${dump(res)}`,
    );
    return `${rootsRequests.length} roots/list requests`;
  });

  await check("logging/setLevel", async () => {
    await client.setLoggingLevel("debug", opts);
  });

  let resources = [];
  await check("resources/list", async () => {
    const res = await client.listResources(undefined, opts);
    resources = res.resources;
    need(
      resources.some((r) => r.uri.startsWith("demo://resource/static/document/")),
      `no static documents listed: ${dump(resources.map((r) => r.uri))}`,
    );
    return `${resources.length} resources`;
  });

  await check("resources/read (static document)", async () => {
    const uri = resources.find((r) => r.uri.startsWith("demo://resource/static/document/")).uri;
    const res = await client.readResource({ uri }, opts);
    need(res.contents.length === 1 && res.contents[0].uri === uri, `bad contents: ${dump(res)}`);
    need((res.contents[0].text ?? "").length > 0, `empty text: ${dump(res)}`);
    return uri;
  });

  await check("resources/templates/list", async () => {
    const res = await client.listResourceTemplates(undefined, opts);
    const t = res.resourceTemplates.map((x) => x.uriTemplate);
    need(t.includes("demo://resource/dynamic/text/{resourceId}"), `templates: ${dump(t)}`);
  });

  await check("resources/read (template demo://resource/dynamic/text/7)", async () => {
    const uri = "demo://resource/dynamic/text/7";
    const res = await client.readResource({ uri }, opts);
    need(res.contents[0]?.uri === uri, `bad contents: ${dump(res)}`);
    need((res.contents[0].text ?? "").startsWith("Resource 7:"), `bad text: ${dump(res)}`);
  });

  await check("resources/read (blob template)", async () => {
    const uri = "demo://resource/dynamic/blob/3";
    const res = await client.readResource({ uri }, opts);
    need(res.contents[0]?.uri === uri && (res.contents[0].blob ?? "").length > 0, `bad contents: ${dump(res)}`);
  });

  await check("resources/subscribe + unsubscribe", async () => {
    const uri = "demo://resource/dynamic/text/1";
    await client.subscribeResource({ uri }, opts);
    await client.unsubscribeResource({ uri }, opts);
  });

  await check("prompts/list", async () => {
    const res = await client.listPrompts(undefined, opts);
    const names = res.prompts.map((p) => p.name);
    for (const base of ["simple-prompt", "args-prompt", "completable-prompt"]) {
      need(names.includes(P(base)), `${P(base)} missing: ${dump(names)}`);
    }
    return `${names.length} prompts`;
  });

  await check(`prompts/get ${P("args-prompt")}`, async () => {
    const res = await client.getPrompt({ name: P("args-prompt"), arguments: { city: "Paris", state: "TX" } }, opts);
    const t = res.messages.map((m) => m.content?.text ?? "").join(" ");
    need(t.includes("What's weather in Paris, TX?"), `unexpected prompt: ${dump(res)}`);
  });

  await check(`completion/complete on ${P("completable-prompt")}`, async () => {
    const res = await client.complete(
      {
        ref: { type: "ref/prompt", name: P("completable-prompt") },
        argument: { name: "department", value: "Eng" },
      },
      opts,
    );
    need(dump(res.completion?.values) === dump(["Engineering"]), `unexpected completion: ${dump(res)}`);
  });

  await check("concurrent tools/call", async () => {
    const calls = Array.from({ length: 8 }, (_, n) =>
      client.callTool({ name: P("echo"), arguments: { message: `c${n}` } }, undefined, opts),
    );
    const results = await Promise.all(calls);
    results.forEach((res, n) => {
      need(!res.isError && texts(res.content).includes(`Echo: c${n}`), `call ${n} got ${dump(res)}`);
    });
    return "8 calls";
  });

  await check("terminate session (DELETE)", async () => {
    await transport.terminateSession();
    await client.close();
  });
}

try {
  await main();
  clearTimeout(overall);
  const s = skipped.length ? `, ${skipped.length} skipped` : "";
  console.log(`ts client: all ${passed} checks passed${s}`);
  process.exit(0);
} catch (e) {
  clearTimeout(overall);
  const why = e instanceof CheckFailed ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}`;
  console.error(`FAIL ${current}: ${why}`);
  if (!(e instanceof CheckFailed) && e?.stack) console.error(e.stack);
  console.error(`ts client: ${passed} checks passed before the failure`);
  process.exit(1);
}
