#!/usr/bin/env node
// Interop check: the official MCP TypeScript SDK's StdioClientTransport launching
// `seawall stdio` in front of seawall's own demo upstream.
//
//   node ts/stdio_client_test.mjs SEAWALL CONFIG [--upstream remote] [--timeout SECS]
//
// SEAWALL is the seawall binary, CONFIG a configuration with the demo upstream named by
// `--upstream` (default `remote`); tools and prompts are expected as `<upstream>__<name>`.
// The last check closes the transport (stdin) and expects seawall to exit 0 by itself,
// before the SDK's 2 s grace would send SIGTERM.
//
// Prints one `ok   <check>` line per passed check; on the first failure prints
// `FAIL <check>: <why>` to stderr and exits 1. Every request and the whole run are bounded.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const SAMPLING_REPLY = "seawall-interop-sampled-reply";

function parseArgs(argv) {
  const out = { positional: [], upstream: "remote", timeout: 60 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--upstream") out.upstream = val();
    else if (a === "--timeout") out.timeout = Number(val());
    else if (a.startsWith("--")) usage(`unknown option ${a}`);
    else out.positional.push(a);
  }
  if (out.positional.length !== 2) usage("SEAWALL and CONFIG are required");
  [out.seawall, out.config] = out.positional;
  return out;
}

function usage(msg) {
  if (msg) console.error(`stdio_client_test.mjs: ${msg}`);
  console.error("usage: stdio_client_test.mjs SEAWALL CONFIG [--upstream NAME] [--timeout SECS]");
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
const P = (name) => `${args.upstream}__${name}`;
const opts = { timeout: 20_000 };

let passed = 0;
let current = "setup";
const overall = setTimeout(() => {
  console.error(`FAIL ${current}: timed out (overall limit ${args.timeout}s)`);
  process.exit(1);
}, args.timeout * 1000);

async function check(name, fn) {
  current = name;
  const detail = await fn();
  passed++;
  console.log(`ok   ${name}${detail ? ` (${detail})` : ""}`);
}

async function main() {
  const samplingRequests = [];
  const client = new Client({ name: "seawall-interop-ts-stdio", version: "0.0.0" }, { capabilities: { sampling: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    samplingRequests.push(req.params);
    return {
      role: "assistant",
      content: { type: "text", text: SAMPLING_REPLY },
      model: "seawall-interop-model",
      stopReason: "endTurn",
    };
  });
  client.onerror = (e) => console.error(`(client transport error: ${e?.message ?? e})`);
  const transport = new StdioClientTransport({
    command: args.seawall,
    args: ["stdio", "--config", args.config],
    env: { RUST_LOG: "info" },
    stderr: "inherit",
  });

  await check("initialize over stdio", async () => {
    await client.connect(transport, opts);
    const v = client.getServerVersion();
    need(v?.name === "seawall", `serverInfo: ${dump(v)}`);
    return `server ${v.name}`;
  });

  await check("ping", async () => {
    await client.ping(opts);
  });

  await check("tools/list (prefixed)", async () => {
    const names = new Set((await client.listTools(undefined, opts)).tools.map((t) => t.name));
    for (const base of ["echo", "sleep", "sample"]) need(names.has(P(base)), `${P(base)} missing: ${dump([...names])}`);
    return `${names.size} tools`;
  });

  await check(`tools/call ${P("echo")}`, async () => {
    const msg = "hello from the TypeScript SDK over stdio ✓";
    const res = await client.callTool({ name: P("echo"), arguments: { message: msg } }, undefined, opts);
    need(!res.isError && texts(res.content).includes(msg), `unexpected echo: ${dump(res)}`);
  });

  await check(`tools/call ${P("sleep")} with progress`, async () => {
    const progress = [];
    const res = await client.callTool({ name: P("sleep"), arguments: { ms: 600 } }, undefined, {
      ...opts,
      onprogress: (p) => progress.push(p.progress),
    });
    need(!res.isError, `isError: ${dump(res)}`);
    need(progress.length >= 1, "no notifications/progress arrived");
    need(progress.every((p, i) => i === 0 || p > progress[i - 1]), `progress not increasing: ${dump(progress)}`);
    return `${progress.length} progress notifications`;
  });

  await check(`tools/call ${P("sleep")} aborted by the client`, async () => {
    const abort = new AbortController();
    const started = Date.now();
    setTimeout(() => abort.abort("enough"), 300);
    let aborted = false;
    try {
      await client.callTool({ name: P("sleep"), arguments: { ms: 30000 } }, undefined, { ...opts, signal: abort.signal });
    } catch {
      aborted = true;
    }
    need(aborted, "the 30 s sleep was not aborted");
    const res = await client.callTool({ name: P("echo"), arguments: { message: "after abort" } }, undefined, opts);
    need(texts(res.content).includes("after abort"), `echo after abort: ${dump(res)}`);
    need(Date.now() - started < 5000, "the session was held up by the aborted call");
  });

  await check("resources/read demo://readme", async () => {
    const rr = await client.readResource({ uri: "demo://readme" }, opts);
    need(rr.contents?.[0]?.text, `no text: ${dump(rr)}`);
  });

  await check(`prompts/get ${P("greet")}`, async () => {
    const gp = await client.getPrompt({ name: P("greet"), arguments: { name: "Ada" } }, opts);
    need(gp.messages.some((m) => (m.content?.text ?? "").includes("Ada")), `prompt: ${dump(gp)}`);
  });

  await check(`tools/call ${P("sample")} with sampling relayed over stdio`, async () => {
    const res = await client.callTool({ name: P("sample"), arguments: { prompt: "ts over stdio" } }, undefined, opts);
    need(samplingRequests.length === 1, `sampling ran ${samplingRequests.length} times`);
    need(texts(res.content).some((t) => t.includes(SAMPLING_REPLY)), `reply not relayed: ${dump(res)}`);
  });

  await check("close: seawall exits 0 when its stdin closes", async () => {
    const child = transport._process;
    const started = Date.now();
    await client.close();
    const took = Date.now() - started;
    need(child.exitCode === 0, `exit code ${child.exitCode}, signal ${child.signalCode}`);
    need(took < 2000, `took ${took} ms: the SDK had to send SIGTERM`);
    return `${took} ms`;
  });
}

main()
  .then(() => {
    clearTimeout(overall);
    console.log(`ts stdio client: all ${passed} checks passed`);
    process.exit(0);
  })
  .catch((e) => {
    console.error(`FAIL ${current}: ${e instanceof CheckFailed ? e.message : (e?.stack ?? e)}`);
    console.error(`ts stdio client: ${passed} checks passed before the failure`);
    process.exit(1);
  });
