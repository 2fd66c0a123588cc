#!/usr/bin/env node
// An MCP server on the official TypeScript SDK offering everything the conformance suite's
// server scenarios ask for (0.1.16 and 0.2.x at 2025-11-25): tools with every content
// kind, logging, progress, sampling, elicitation (SEP-1034 defaults, SEP-1330 enums),
// a stream the tool closes mid-call (SEP-1699), a JSON Schema 2020-12 tool, resources,
// a template, subscriptions, prompts, completions and DNS-rebinding protection.
//
// Streamable HTTP with sessions: one McpServer and one StreamableHTTPServerTransport per
// session, each with its own in-memory event store so cut streams can be resumed with
// Last-Event-ID. Server-to-client requests made while a tool runs (sampling/createMessage,
// elicitation/create) carry no related request id: the SDK sends them on the session's
// standalone GET stream, as most TypeScript servers do. A peer that opens that stream
// late never sees them, which is what this server is meant to be able to show.
//
// Plain ESM for Node 22, no build step. Listens on 127.0.0.1:$PORT (0 = any free port)
// and prints exactly one line on stdout once ready:
//   listening on http://127.0.0.1:<port>/mcp
// Everything else goes to stderr. Stops on SIGTERM, SIGINT, or when stdin is a pipe that
// closes.

import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { fstatSync } from 'node:fs';
import * as z from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  ListToolsRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest
} from '@modelcontextprotocol/sdk/types.js';

const ENDPOINT = '/mcp';
const MAX_BODY_BYTES = 4 * 1024 * 1024;
// Milliseconds a client should wait before reconnecting to a stream the server closed.
const RETRY_MS = 500;

function log(...parts) {
  process.stderr.write(`[conformance-server] ${parts.join(' ')}\n`);
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Fixed payloads

// A 1x1 PNG and a tiny WAV, base64.
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV_TINY = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

const text = (value) => ({ type: 'text', text: value });
const image = () => ({ type: 'image', data: PNG_1X1, mimeType: 'image/png' });

// The advertised input schema of `json_schema_2020_12_tool`. It is sent verbatim in
// tools/list so that the 2020-12 keywords ($schema, $defs with an $anchor,
// additionalProperties, allOf/anyOf, if/then/else) reach the client untouched.
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'postalAddress',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } }
    }
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    channel: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' }
  },
  additionalProperties: false,
  allOf: [{ anyOf: [{ required: ['name'] }, { required: ['address'] }, { required: ['email'] }] }],
  if: { properties: { channel: { const: 'phone' } }, required: ['channel'] },
  then: { required: ['phone'] },
  else: {}
};

// What the elicitation tools ask for.
const PROFILE_FORM = {
  type: 'object',
  properties: {
    username: { type: 'string', description: 'Name to use' },
    email: { type: 'string', description: 'Address to reach the user at' }
  },
  required: ['username', 'email']
};

const DEFAULTS_FORM = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'Full name', default: 'John Doe' },
    age: { type: 'integer', description: 'Age in years', default: 30 },
    score: { type: 'number', description: 'Last score', default: 95.5 },
    status: {
      type: 'string',
      description: 'Account state',
      enum: ['active', 'inactive', 'pending'],
      default: 'active'
    },
    verified: { type: 'boolean', description: 'Whether the account is verified', default: true }
  },
  required: []
};

const ENUMS_FORM = {
  type: 'object',
  properties: {
    untitledSingle: {
      type: 'string',
      description: 'One plain value',
      enum: ['option1', 'option2', 'option3']
    },
    titledSingle: {
      type: 'string',
      description: 'One value shown by title',
      oneOf: [
        { const: 'value1', title: 'Value one' },
        { const: 'value2', title: 'Value two' },
        { const: 'value3', title: 'Value three' }
      ]
    },
    legacyEnum: {
      type: 'string',
      description: 'One value, titles in the older enumNames form',
      enum: ['opt1', 'opt2', 'opt3'],
      enumNames: ['First', 'Second', 'Third']
    },
    untitledMulti: {
      type: 'array',
      description: 'Several plain values',
      minItems: 1,
      maxItems: 3,
      items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
    },
    titledMulti: {
      type: 'array',
      description: 'Several values shown by title',
      minItems: 1,
      maxItems: 3,
      items: {
        anyOf: [
          { const: 'value1', title: 'Value one' },
          { const: 'value2', title: 'Value two' },
          { const: 'value3', title: 'Value three' }
        ]
      }
    }
  },
  required: []
};

const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

// ---------------------------------------------------------------------------
// Resumability: an event store per session.

// Keeps every event of every stream of one session, in order, so a client that lost a
// stream can ask for what followed the last event it saw. Event ids are
// `<stream id>|<sequence>`; the sequence is unique within the store.
class SessionEventStore {
  #sequence = 0;
  #streams = new Map(); // stream id -> [{ id, message }]
  #where = new Map(); // event id -> { streamId, index }

  async storeEvent(streamId, message) {
    this.#sequence += 1;
    const id = `${streamId}|${this.#sequence}`;
    let events = this.#streams.get(streamId);
    if (!events) {
      events = [];
      this.#streams.set(streamId, events);
    }
    this.#where.set(id, { streamId, index: events.length });
    events.push({ id, message });
    return id;
  }

  async getStreamIdForEventId(eventId) {
    return this.#where.get(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const place = this.#where.get(lastEventId);
    if (!place) throw new Error(`unknown event id ${lastEventId}`);
    const events = this.#streams.get(place.streamId);
    for (const event of events.slice(place.index + 1)) {
      // Priming events carry no message: nothing to resend for them.
      if (event.message && event.message.jsonrpc) await send(event.id, event.message);
    }
    return place.streamId;
  }
}

// ---------------------------------------------------------------------------
// The MCP side: one McpServer per session.

// Sends a log notification tied to the request being handled, unless the client asked
// for a higher level with logging/setLevel.
function makeLogger(session, extra) {
  return async (level, message) => {
    if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(session.logLevel)) return;
    await extra.sendNotification({
      method: 'notifications/message',
      params: { level, logger: 'conformance-server', data: message }
    });
  };
}

// The tools, in the order tools/list gives them. `shape` is the zod shape the SDK checks
// arguments against; `listed` replaces the schema derived from it in tools/list.
function toolTable(mcp, session) {
  const ask = mcp.server;
  return [
    {
      name: 'test_simple_text',
      description: 'Answers with one text block',
      run: async () => ({ content: [text('This is a simple text response for testing.')] })
    },
    {
      name: 'test_image_content',
      description: 'Answers with one PNG image block',
      run: async () => ({ content: [image()] })
    },
    {
      name: 'test_audio_content',
      description: 'Answers with one WAV audio block',
      run: async () => ({ content: [{ type: 'audio', data: WAV_TINY, mimeType: 'audio/wav' }] })
    },
    {
      name: 'test_embedded_resource',
      description: 'Answers with an embedded text resource',
      run: async () => ({
        content: [
          {
            type: 'resource',
            resource: {
              uri: 'test://embedded-resource',
              mimeType: 'text/plain',
              text: 'This is an embedded resource content.'
            }
          }
        ]
      })
    },
    {
      name: 'test_multiple_content_types',
      description: 'Answers with text, an image and an embedded JSON resource',
      run: async () => ({
        content: [
          text('Several kinds of content follow.'),
          image(),
          {
            type: 'resource',
            resource: {
              uri: 'test://mixed-content-resource',
              mimeType: 'application/json',
              text: JSON.stringify({ kind: 'mixed', items: 3 })
            }
          }
        ]
      })
    },
    {
      name: 'test_tool_with_logging',
      description: 'Logs three messages while it runs',
      run: async (_args, extra) => {
        const say = makeLogger(session, extra);
        await say('info', 'Tool execution started');
        await pause(50);
        await say('info', 'Tool processing data');
        await pause(50);
        await say('info', 'Tool execution completed');
        return { content: [text('Logged three messages.')] };
      }
    },
    {
      name: 'test_tool_with_progress',
      description: 'Reports progress three times when the call carries a progress token',
      run: async (_args, extra) => {
        const token = extra._meta?.progressToken;
        const steps = [0, 50, 100];
        for (const [i, progress] of steps.entries()) {
          if (token !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress, total: 100, message: `step ${i + 1} of 3` }
            });
          }
          if (i < steps.length - 1) await pause(50);
        }
        return { content: [text(`progress reported for token ${String(token)}`)] };
      }
    },
    {
      name: 'test_error_handling',
      description: 'Always fails with an error result',
      run: async () => ({
        isError: true,
        content: [text('This tool intentionally returns an error for testing')]
      })
    },
    {
      name: 'test_reconnection',
      description:
        'Closes the response stream of its own call, then answers; the client gets the answer by resuming with Last-Event-ID (SEP-1699)',
      run: async (_args, extra) => {
        extra.closeSSEStream?.();
        await pause(200);
        return { content: [text('Answer sent after the stream was closed.')] };
      }
    },
    {
      name: 'test_sampling',
      description: 'Asks the client for an LLM completion of the prompt',
      shape: { prompt: z.string().describe('Text to send for completion') },
      run: async ({ prompt }) => {
        // No related request id: the request goes out on the standalone GET stream.
        const answer = await ask.createMessage({
          messages: [{ role: 'user', content: text(prompt) }],
          maxTokens: 100
        });
        const content = Array.isArray(answer.content) ? answer.content[0] : answer.content;
        return { content: [text(`LLM response: ${content?.text ?? '(no text)'}`)] };
      }
    },
    {
      name: 'test_elicitation',
      description: 'Asks the user for a user name and an email address',
      shape: { message: z.string().describe('What to tell the user') },
      run: async ({ message }) => {
        const answer = await ask.elicitInput({ message, requestedSchema: PROFILE_FORM });
        return { content: [text(describeElicitation('User response', answer))] };
      }
    },
    {
      name: 'test_elicitation_sep1034_defaults',
      description: 'Asks for a form whose every primitive field has a default (SEP-1034)',
      run: async () => {
        const answer = await ask.elicitInput({
          message: 'Check these values; each has a default',
          requestedSchema: DEFAULTS_FORM
        });
        return { content: [text(describeElicitation('Elicitation completed', answer))] };
      }
    },
    {
      name: 'test_elicitation_sep1330_enums',
      description: 'Asks for a form with every enum variant of SEP-1330',
      run: async () => {
        const answer = await ask.elicitInput({
          message: 'Pick from these lists',
          requestedSchema: ENUMS_FORM
        });
        return { content: [text(describeElicitation('Elicitation completed', answer))] };
      }
    },
    {
      name: 'json_schema_2020_12_tool',
      description: 'Takes arguments described with JSON Schema 2020-12 keywords (SEP-1613, SEP-2106)',
      shape: {
        name: z.string().optional(),
        address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional(),
        channel: z.enum(['phone', 'email']).optional(),
        phone: z.string().optional(),
        email: z.string().optional()
      },
      listed: SCHEMA_2020_12,
      run: async (args) => ({ content: [text(`received ${JSON.stringify(args)}`)] })
    }
  ];
}

function describeElicitation(prefix, answer) {
  return `${prefix}: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`;
}

function registerTools(mcp, session) {
  const tools = toolTable(mcp, session);
  for (const tool of tools) {
    mcp.registerTool(
      tool.name,
      { description: tool.description, inputSchema: tool.shape ?? {} },
      tool.run
    );
  }
  // The SDK derives each listed schema from the zod shape, which cannot express all of
  // 2020-12; list the tools from the table instead, with the verbatim schema where given.
  const listed = tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    inputSchema: tool.listed ?? z.toJSONSchema(z.object(tool.shape ?? {}), { io: 'input' })
  }));
  mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));
}

function registerResources(mcp, session) {
  const plain = (uri, body) => ({ contents: [{ uri, mimeType: 'text/plain', text: body }] });
  mcp.registerResource(
    'static-text',
    'test://static-text',
    { title: 'Static text', description: 'A fixed text resource', mimeType: 'text/plain' },
    async (uri) => plain(uri.href, 'This is the content of the static text resource.')
  );
  mcp.registerResource(
    'static-binary',
    'test://static-binary',
    { title: 'Static binary', description: 'A fixed PNG image', mimeType: 'image/png' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG_1X1 }] })
  );
  mcp.registerResource(
    'watched-resource',
    'test://watched-resource',
    { title: 'Watched', description: 'A resource clients may subscribe to', mimeType: 'text/plain' },
    async (uri) => plain(uri.href, 'Watched resource content')
  );
  const template = new ResourceTemplate('test://template/{id}/data', {
    list: undefined,
    complete: { id: (value) => ['1', '42', '123'].filter((id) => id.startsWith(value)) }
  });
  mcp.registerResource(
    'template',
    template,
    { title: 'Data by id', description: 'JSON data for any id', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, source: 'template', note: `data for id ${id}` })
        }
      ]
    })
  );
  mcp.server.setRequestHandler(SubscribeRequestSchema, async ({ params }) => {
    session.subscriptions.add(params.uri);
    return {};
  });
  mcp.server.setRequestHandler(UnsubscribeRequestSchema, async ({ params }) => {
    session.subscriptions.delete(params.uri);
    return {};
  });
}

function registerPrompts(mcp) {
  const userSays = (content) => ({ role: 'user', content });
  mcp.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple', description: 'A prompt without arguments' },
    async () => ({ messages: [userSays(text('This is a simple prompt for testing.'))] })
  );
  const firstWords = ['test', 'testing', 'tested', 'paris', 'park'];
  mcp.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'With arguments',
      description: 'A prompt that quotes its two arguments',
      argsSchema: {
        arg1: completable(z.string().describe('First argument'), (value) =>
          firstWords.filter((word) => word.startsWith(value ?? ''))
        ),
        arg2: z.string().describe('Second argument')
      }
    },
    async ({ arg1, arg2 }) => ({
      messages: [userSays(text(`Prompt with arguments: arg1='${arg1}', arg2='${arg2}'`))]
    })
  );
  mcp.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'With embedded resource',
      description: 'A prompt that embeds the resource it is given',
      argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') }
    },
    async ({ resourceUri }) => ({
      messages: [
        userSays({
          type: 'resource',
          resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded text for the prompt.' }
        }),
        userSays(text('Summarise the resource above.'))
      ]
    })
  );
  mcp.registerPrompt(
    'test_prompt_with_image',
    { title: 'With image', description: 'A prompt that carries an image' },
    async () => ({ messages: [userSays(image()), userSays(text('Describe the image above.'))] })
  );
}

function buildMcpServer(session) {
  const mcp = new McpServer(
    { name: 'seawall-conformance-server', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {}
      }
    }
  );
  registerTools(mcp, session);
  registerResources(mcp, session);
  registerPrompts(mcp);
  // Kept here, not in the SDK, so the tools can filter their log messages by it.
  mcp.server.setRequestHandler(SetLevelRequestSchema, async ({ params }) => {
    session.logLevel = params.level;
    return {};
  });
  return mcp;
}

// ---------------------------------------------------------------------------
// HTTP side

const sessions = new Map(); // session id -> { transport, mcp }

async function openSession(req, res, body) {
  const session = { logLevel: 'debug', subscriptions: new Set() };
  const mcp = buildMcpServer(session);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore: new SessionEventStore(),
    retryInterval: RETRY_MS,
    onsessioninitialized: (id) => {
      sessions.set(id, { transport, mcp });
      log('session', id, 'opened');
    }
  });
  transport.onclose = () => {
    const id = transport.sessionId;
    if (id && sessions.delete(id)) log('session', id, 'closed');
  };
  await mcp.connect(transport);
  await transport.handleRequest(req, res, body);
}

// DNS-rebinding protection: only loopback names may appear in Host and Origin.
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

function hostName(hostHeader) {
  const match = /^(\[[^\]]*\]|[^:]*)(:\d+)?$/.exec(hostHeader);
  return match ? match[1].toLowerCase() : '';
}

function fromLoopback(req) {
  const host = req.headers.host;
  if (!host || !LOOPBACK_NAMES.has(hostName(host))) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return LOOPBACK_NAMES.has(new URL(origin).hostname.toLowerCase());
  } catch {
    return false;
  }
}

function replyError(res, status, code, message, headers = {}, id = null) {
  if (res.headersSent) return;
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id }));
}

// The id to answer a refused request with: its own when it is a single request.
const idOf = (body) => (body && !Array.isArray(body) && body.id !== undefined ? body.id : null);

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('body too large'));
        req.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const opensSession = (body) =>
  Array.isArray(body) ? body.some(isInitializeRequest) : isInitializeRequest(body);

async function handlePost(req, res, sessionId) {
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch {
    replyError(res, 400, -32700, 'Parse error: the body is not JSON');
    return;
  }
  if (sessionId !== undefined) {
    const known = sessions.get(sessionId);
    if (!known) {
      replyError(res, 404, -32001, 'Session not found', {}, idOf(body));
      return;
    }
    await known.transport.handleRequest(req, res, body);
  } else if (opensSession(body)) {
    await openSession(req, res, body);
  } else {
    replyError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required', {}, idOf(body));
  }
}

async function handleRequest(req, res) {
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  if (path !== ENDPOINT) {
    replyError(res, 404, -32000, `Not found: the MCP endpoint is ${ENDPOINT}`);
    return;
  }
  if (!fromLoopback(req)) {
    log('refused', req.method, 'with Host', req.headers.host, 'Origin', req.headers.origin);
    replyError(res, 403, -32000, 'Forbidden: Host and Origin must name this machine');
    return;
  }
  const sessionId = req.headers['mcp-session-id'];
  if (req.method === 'POST') {
    await handlePost(req, res, sessionId);
    return;
  }
  if (req.method !== 'GET' && req.method !== 'DELETE') {
    replyError(res, 405, -32000, 'Method not allowed', { Allow: 'GET, POST, DELETE' });
    return;
  }
  if (sessionId === undefined) {
    replyError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    return;
  }
  const known = sessions.get(sessionId);
  if (!known) {
    replyError(res, 404, -32001, 'Session not found');
    return;
  }
  await known.transport.handleRequest(req, res);
}

const http = createServer((req, res) => {
  handleRequest(req, res).catch((error) => {
    log('request failed:', error?.stack ?? String(error));
    replyError(res, 500, -32603, 'Internal error');
  });
});

function shutdown(signal) {
  log('stopping on', signal);
  // Whatever is still open (a tool waiting on a client, say) must not hold the exit up.
  setTimeout(() => process.exit(0), 500).unref();
  http.close();
  http.closeAllConnections();
  const closing = [...sessions.values()].map(({ transport }) => transport.close());
  Promise.allSettled(closing).then(() => process.exit(0));
}

process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
// A parent holding our stdin as a pipe stops us by closing it (or by dying). Stdin that is
// /dev/null or a terminal says nothing about the parent, so it is left alone.
if (fstatSync(0, { throwIfNoEntry: false })?.isFIFO()) {
  process.stdin.on('end', () => shutdown('stdin closed')).resume();
}

const port = Number.parseInt(process.env.PORT ?? '0', 10) || 0;
http.listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${http.address().port}${ENDPOINT}\n`);
});
