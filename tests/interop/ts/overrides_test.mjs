#!/usr/bin/env node
// Interop check: the official MCP TypeScript SDK client sees the tools seawall reshapes.
//
//   node ts/overrides_test.mjs URL [--upstream demo]
//
// URL is a seawall endpoint in front of seawall's demo upstream configured as
// tests/it/overrides.rs configures it: `add` shown as `plus_forty` (title, description,
// `idempotentHint`, its argument `b` fixed at 40), `echo` as `say` (its `message`
// defaulting to "nothing to say"), `fail` hidden. `--upstream ""` expects bare names
// (`/mcp/demo`), otherwise `<upstream>__<name>`.
//
// Prints one `ok   <check>` line per passed check; on the first failure prints
// `FAIL <check>: <why>` to stderr and exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const argv = process.argv.slice(2);
const url = argv[0];
const at = argv.indexOf("--upstream");
const upstream = at >= 0 ? argv[at + 1] : "demo";
const P = (name) => (upstream ? `${upstream}__${name}` : name);
const opts = { timeout: 20_000 };
const INVALID_PARAMS = -32602;

class CheckFailed extends Error {}
function need(cond, why) {
  if (!cond) throw new CheckFailed(why);
}

let current = "setup";
let passed = 0;
async function check(name, fn) {
  current = name;
  const detail = await fn();
  passed++;
  console.log(`ok   ${name}${detail ? ` (${detail})` : ""}`);
}

const overall = setTimeout(() => {
  console.error(`FAIL ${current}: timed out`);
  process.exit(1);
}, 60_000);

async function main() {
  const client = new Client({ name: "seawall-interop-ts-overrides", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)), opts);
  const tools = new Map((await client.listTools({}, opts)).tools.map((t) => [t.name, t]));

  await check("tools/list shows the overrides", async () => {
    need(tools.has(P("plus_forty")), `plus_forty missing: ${[...tools.keys()]}`);
    need(!tools.has(P("add")), "the upstream's own name is listed");
    need(!tools.has(P("fail")), "the hidden tool is listed");
    const plus = tools.get(P("plus_forty"));
    need(plus.title === "Plus forty", `title ${plus.title}`);
    need(plus.description === "Adds forty to a.", `description ${plus.description}`);
    need(plus.annotations?.idempotentHint === true, `annotations ${JSON.stringify(plus.annotations)}`);
    need(JSON.stringify(Object.keys(plus.inputSchema.properties ?? {})) === '["a"]', JSON.stringify(plus.inputSchema));
    need(JSON.stringify(plus.inputSchema.required) === '["a"]', JSON.stringify(plus.inputSchema));
    const say = tools.get(P("say")).inputSchema;
    need(say.properties.message.default === "nothing to say", JSON.stringify(say));
    need(!(say.required ?? []).includes("message"), JSON.stringify(say));
    return `${tools.size} tools`;
  });

  await check("a renamed tool is called with its fixed argument", async () => {
    const res = await client.callTool({ name: P("plus_forty"), arguments: { a: 2 } }, undefined, opts);
    need(!res.isError, JSON.stringify(res));
    need(res.structuredContent?.sum === 42, JSON.stringify(res));
    return "2 + fixed 40 = 42";
  });

  await check("a default fills an argument left out", async () => {
    const res = await client.callTool({ name: P("say"), arguments: {} }, undefined, opts);
    need(res.content?.[0]?.text === "nothing to say", JSON.stringify(res));
  });

  await check("a fixed argument sent by the client is -32602", async () => {
    try {
      const res = await client.callTool({ name: P("plus_forty"), arguments: { a: 2, b: 1 } }, undefined, opts);
      throw new CheckFailed(`a fixed argument was accepted: ${JSON.stringify(res)}`);
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      need(e.code === INVALID_PARAMS, `code ${e.code}: ${e.message}`);
      need(e.message.includes("set by the gateway"), e.message);
      return `error ${e.code}`;
    }
  });

  await check("the upstream's own name is unknown", async () => {
    try {
      const res = await client.callTool({ name: P("add"), arguments: { a: 2, b: 1 } }, undefined, opts);
      throw new CheckFailed(`the upstream's own name was called: ${JSON.stringify(res)}`);
    } catch (e) {
      if (e instanceof CheckFailed) throw e;
      need(e.code === INVALID_PARAMS && e.message.includes("Unknown tool"), `code ${e.code}: ${e.message}`);
      return `error ${e.code}`;
    }
  });

  await client.close();
}

main()
  .then(() => {
    clearTimeout(overall);
    console.log(`ts overrides client: ${passed} checks passed`);
    process.exit(0);
  })
  .catch((e) => {
    console.error(`FAIL ${current}: ${e instanceof CheckFailed ? e.message : (e?.stack ?? e)}`);
    process.exit(1);
  });
