#!/usr/bin/env python3
"""A dual-era MCP "everything" server on the official Python SDK, for the conformance suite.

    everything_server.py [--port PORT] [--listen-framing sse|ndjson]

Serves Streamable HTTP on 127.0.0.1 (port 0 unless given) at `/mcp` and prints
`listening on http://127.0.0.1:PORT/mcp` on stdout once it accepts connections. Both eras
are served on that one endpoint, as the SDK does: the legacy `initialize` handshake with
sessions (2024-11-05 ... 2025-11-25) and the stateless per-request envelope of 2026-07-28.

It implements the tools, resources, templates, prompts and completions the conformance
suite's server scenarios ask for (`conformance list --server`; each scenario's description
names them), so the suite can be run against it directly and through seawall.

The multi-round-trip tools and prompt (`test_input_required_result_*`) answer in the
client's era: a 2026-07-28 request gets an `input_required` result with the input requests
the scenario expects (`requestState` sealed by the SDK's `RequestStateBoundary`, so a
tampered one is -32602); a legacy session gets the same questions as server-to-client
requests (`elicitation/create`, `sampling/createMessage`, `roots/list`) on the call's own
stream, and the result once they are answered. A gateway that bridges modern clients onto
a legacy session is exercised by the second form.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# Logging, sampling and roots are deprecated in 2026-07-28 but still served to legacy
# sessions, which the suite's default run exercises.
warnings.filterwarnings("ignore", message=".*2026-07-28.*")

NAME = "seawall-everything"
Ctx = ServerRequestContext[Any, Any]

# A 1x1 red PNG and a minimal WAV file.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# JSON Schema 2020-12 keywords a server must publish unchanged (SEP-1613, SEP-2106).
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


def string_args(*names: str, header: dict[str, str] | None = None) -> dict[str, Any]:
    """An object schema of required string properties (`header` maps one to `x-mcp-header`)."""
    props: dict[str, Any] = {}
    for n in names:
        props[n] = {"type": "string"}
        if header and n in header:
            props[n]["x-mcp-header"] = header[n]
    return {"type": "object", "properties": props, "required": list(names)}


# `region` travels in the `Mcp-Param-Region` header too (SEP-2243).
REGION_ARGS = string_args("region", header={"region": "Region"})

TOOLS: list[types.Tool] = [
    types.Tool(name=n, description=d, input_schema=s)
    for n, d, s in [
        ("test_simple_text", "Returns simple text content", NO_ARGS),
        ("test_image_content", "Returns image content", NO_ARGS),
        ("test_audio_content", "Returns audio content", NO_ARGS),
        ("test_embedded_resource", "Returns an embedded resource", NO_ARGS),
        ("test_multiple_content_types", "Returns text, image and resource content", NO_ARGS),
        ("test_tool_with_logging", "Logs three messages while it runs", NO_ARGS),
        ("test_tool_with_progress", "Reports progress 0, 50, 100 of 100", NO_ARGS),
        ("test_error_handling", "Always fails with isError", NO_ARGS),
        ("test_sampling", "Asks the client to sample (legacy sessions)", string_args("prompt")),
        ("test_elicitation", "Asks the client for input (legacy sessions)", string_args("message")),
        ("test_elicitation_sep1034_defaults", "Elicits a form with defaults (SEP-1034)", NO_ARGS),
        ("test_elicitation_sep1330_enums", "Elicits every enum form (SEP-1330)", NO_ARGS),
        ("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020_12),
        ("test_header_param", "Echoes an argument mirrored in Mcp-Param-Region", REGION_ARGS),
        ("test_missing_capability", "Needs the client's sampling capability", NO_ARGS),
        ("test_streaming_elicitation", "Streams a progress notification before its result", NO_ARGS),
        ("test_logging_tool", "Logs only when the request opted in to a log level", NO_ARGS),
        ("test_trigger_tool_change", "Announces a tool list change", NO_ARGS),
        ("test_trigger_prompt_change", "Announces a prompt list change", NO_ARGS),
        ("test_input_required_result_elicitation", "Asks for the user's name", NO_ARGS),
        ("test_input_required_result_sampling", "Asks the client to sample", NO_ARGS),
        ("test_input_required_result_list_roots", "Asks for the client's roots", NO_ARGS),
        ("test_input_required_result_request_state", "Round-trips requestState", NO_ARGS),
        ("test_input_required_result_multiple_inputs", "Asks three questions at once", NO_ARGS),
        ("test_input_required_result_multi_round", "Asks two questions in two rounds", NO_ARGS),
        ("test_input_required_result_tampered_state", "Rejects a tampered requestState", NO_ARGS),
        ("test_input_required_result_capabilities", "Asks only what the client can answer", NO_ARGS),
    ]
]
TOOL_SCHEMAS = {t.name: t.input_schema for t in TOOLS}

# The handshake-era tools that ask the client mid-call.
LEGACY_QUESTIONS = {
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
}


def text(t: str) -> types.TextContent:
    return types.TextContent(type="text", text=t)


def done(t: str) -> types.CallToolResult:
    return types.CallToolResult(content=[text(t)])


def modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def caps(ctx: Ctx) -> types.ClientCapabilities:
    return ctx.session.client_capabilities or types.ClientCapabilities()


# ---------------------------------------------------------------------------------------
# The questions a multi-round-trip call asks, in both eras
# ---------------------------------------------------------------------------------------


def elicit(message: str, **props: str) -> types.ElicitRequest:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}, "required": list(props)}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    msg = types.SamplingMessage(role="user", content=text(prompt))
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=[msg], max_tokens=max_tokens))


ROOTS = types.ListRootsRequest()

# Each multi-round-trip target: its rounds, each a map of key -> question.
ROUNDS: dict[str, list[dict[str, types.ServerRequest]]] = {
    "test_input_required_result_elicitation": [{"user_name": elicit("What is your name?", name="string")}],
    "test_input_required_result_sampling": [{"capital_question": sample("What is the capital of France?", 100)}],
    "test_input_required_result_list_roots": [{"client_roots": ROOTS}],
    "test_input_required_result_request_state": [{"confirm": elicit("Please confirm", ok="boolean")}],
    "test_input_required_result_multiple_inputs": [
        {
            "user_name": elicit("What is your name?", name="string"),
            "greeting": sample("Generate a greeting", 50),
            "client_roots": ROOTS,
        }
    ],
    "test_input_required_result_multi_round": [
        {"step1": elicit("Step 1: What is your name?", name="string")},
        {"step2": elicit("Step 2: What is your favorite color?", color="string")},
    ],
    "test_input_required_result_tampered_state": [{"confirm": elicit("Please confirm", ok="boolean")}],
    "test_input_required_result_prompt": [
        {"user_context": elicit("What context should the prompt use?", context="string")}
    ],
}

RESULT_TYPES: dict[str, type[Any]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}


def capability_questions(ctx: Ctx) -> dict[str, types.ServerRequest]:
    """`test_input_required_result_capabilities`: only what the client declared it can answer."""
    c = caps(ctx)
    asks: dict[str, types.ServerRequest] = {}
    if c.elicitation is not None:
        asks["elicit_input"] = elicit("Elicitation input", value="string")
    if c.sampling is not None:
        asks["sample_input"] = sample("Sample request", 50)
    return asks


def rounds_of(ctx: Ctx, target: str) -> list[dict[str, types.ServerRequest]]:
    if target == "test_input_required_result_capabilities":
        asks = capability_questions(ctx)
        return [asks] if asks else []
    return ROUNDS[target]


def summary(answers: dict[str, Any]) -> str:
    """What the final result says about the answers (the scenarios only read its shape)."""
    parts = []
    for key, a in sorted(answers.items()):
        if isinstance(a, types.ElicitResult):
            parts.append(f"{key}={a.action}:{json.dumps(a.content or {}, sort_keys=True)}")
        elif isinstance(a, types.CreateMessageResult | types.CreateMessageResultWithTools):
            parts.append(f"{key}=sampled:{getattr(a.content, 'text', '?')}")
        elif isinstance(a, types.ListRootsResult):
            parts.append(f"{key}=roots:{','.join(str(r.uri) for r in a.roots)}")
    return "; ".join(parts) or "no input"


async def ask_in_session(ctx: Ctx, questions: dict[str, types.ServerRequest]) -> dict[str, Any]:
    """Legacy era: ask a round's questions as server requests on this call's stream, all
    at once (as the modern era asks them in one `input_required` result)."""
    answers: dict[str, Any] = {}
    related = ServerMessageMetadata(related_request_id=ctx.request_id)

    async def ask(key: str, q: types.ServerRequest) -> None:
        answers[key] = await ctx.session.send_request(q, RESULT_TYPES[q.method], metadata=related)

    async with anyio.create_task_group() as tg:
        for key, q in questions.items():
            tg.start_soon(ask, key, q)
    return answers


def input_required(questions: dict[str, types.ServerRequest], state: str | None) -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests=dict(questions), request_state=state)


async def multi_round(
    ctx: Ctx, target: str, responses: dict[str, Any] | None, state: str | None
) -> types.InputRequiredResult | dict[str, Any]:
    """Runs one round of `target`: returns either the questions still open (modern era) or
    every answer (the legacy era asks them all in this call; the modern era when the
    client's `inputResponses` answer the last round)."""
    rounds = rounds_of(ctx, target)
    if not modern(ctx):
        answers: dict[str, Any] = {}
        for questions in rounds:
            answers.update(await ask_in_session(ctx, questions))
        return answers
    # Modern era. `state` (verified and unsealed by the RequestStateBoundary) counts the
    # rounds already answered; answers to unknown keys are ignored, a round whose keys are
    # not all answered is asked again.
    done_rounds = 0
    if state is not None:
        if not state.startswith(f"{target}:round="):
            raise MCPError(code=types.INVALID_PARAMS, message="requestState is not for this request")
        done_rounds = int(state.split("=", 1)[1])
    responses = responses or {}
    while done_rounds < len(rounds) and all(k in responses for k in rounds[done_rounds]):
        done_rounds += 1
        if state is None:
            break  # without state, answers count for the first round only
    if done_rounds >= len(rounds):
        return {k: v for k, v in responses.items() if any(k in r for r in rounds)}
    # The request-state and multi-round scenarios require state on every round; the
    # others get it too, so a retry never depends on the client keeping anything else.
    return input_required(rounds[done_rounds], f"{target}:round={done_rounds}")


# ---------------------------------------------------------------------------------------
# Handlers
# ---------------------------------------------------------------------------------------

bus = InMemorySubscriptionBus()


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
    name, args = params.name, params.arguments or {}
    if name.startswith("test_input_required_result_") and name in TOOL_SCHEMAS:
        got = await multi_round(ctx, name, params.input_responses, params.request_state)
        if isinstance(got, types.InputRequiredResult):
            return got
        if name == "test_input_required_result_request_state":
            return done(f"state-ok: {summary(got)}")
        return done(f"Hello, {summary(got)}!" if got else "No supported capabilities declared")
    match name:
        case "test_simple_text":
            return done("This is a simple text response for testing.")
        case "test_image_content":
            return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
        case "test_audio_content":
            return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
        case "test_embedded_resource":
            res = types.TextResourceContents(
                uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
            )
            return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=res)])
        case "test_multiple_content_types":
            res = types.TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            )
            return types.CallToolResult(
                content=[
                    text("Multiple content types test:"),
                    types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                    types.EmbeddedResource(type="resource", resource=res),
                ]
            )
        case "test_tool_with_logging":
            for i, msg in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
                if i:
                    await anyio.sleep(0.05)
                await ctx.session.send_log_message("info", msg, "everything", related_request_id=ctx.request_id)
            return done("Tool with logging executed successfully")
        case "test_tool_with_progress":
            for i, p in enumerate([0, 50, 100]):
                if i:
                    await anyio.sleep(0.05)
                await ctx.session.report_progress(p, 100)
            return done("Tool with progress executed successfully")
        case "test_error_handling":
            failure = text("This tool intentionally returns an error for testing")
            return types.CallToolResult(content=[failure], is_error=True)
        case _ if name in LEGACY_QUESTIONS:
            return await legacy_question(ctx, name, args)
        case "json_schema_2020_12_tool":
            return done(f"JSON Schema 2020-12 tool called with: {json.dumps(args, sort_keys=True)}")
        case "test_header_param":
            return done(f"region={args.get('region')}")
        case "test_missing_capability":
            if caps(ctx).sampling is None:
                raise MCPError(
                    code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message="Client did not declare the sampling capability",
                    data={"requiredCapabilities": {"sampling": {}}},
                )
            return done("Success")
        case "test_streaming_elicitation":
            await ctx.session.report_progress(50, 100)
            return done("Streaming complete")
        case "test_logging_tool":
            await ctx.session.send_log_message("info", "Diagnostic", "everything", related_request_id=ctx.request_id)
            return done("Logging evaluated")
        case "test_trigger_tool_change":
            await bus.publish(ToolsListChanged())
            if not modern(ctx):
                await ctx.session.send_tool_list_changed()
            return done("Mutation triggered")
        case "test_trigger_prompt_change":
            await bus.publish(PromptsListChanged())
            if not modern(ctx):
                await ctx.session.send_prompt_list_changed()
            return done("Mutation triggered")
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


def enum_form() -> dict[str, Any]:
    options = ["option1", "option2", "option3"]
    titled = [{"const": f"value{i}", "title": t} for i, t in enumerate(["First", "Second", "Third"], 1)]
    return {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option", "enum": options},
            "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": options},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": titled},
            },
        },
        "required": [],
    }


def defaults_form() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }


async def legacy_question(ctx: Ctx, name: str, args: dict[str, Any]) -> types.CallToolResult:
    """The handshake-era tools that ask the client mid-call (the modern era has no such
    requests: its clients get `input_required` results instead)."""
    if modern(ctx):
        raise MCPError(code=types.INVALID_PARAMS, message=f"{name} needs a legacy session")
    if name == "test_sampling":
        q: types.ServerRequest = sample(str(args.get("prompt", "")), 100)
    elif name == "test_elicitation":
        q = elicit(str(args.get("message", "")), username="string", email="string")
    elif name == "test_elicitation_sep1034_defaults":
        message = "Please review and update the form fields with defaults"
        q = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=defaults_form()))
    else:
        message = "Please select options from the enum fields"
        q = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=enum_form()))
    answers = await ask_in_session(ctx, {"answer": q})
    a = answers["answer"]
    if isinstance(a, types.ElicitResult):
        return done(f"User response: action={a.action}, content={json.dumps(a.content or {}, sort_keys=True)}")
    return done(f"LLM response: {getattr(a.content, 'text', '')}")


STATIC = {
    "test://static-text": ("Static Text Resource", "text/plain", "This is the content of the static text resource."),
    "test://static-binary": ("Static Binary Resource", "image/png", None),
    "test://watched-resource": ("Watched Resource", "text/plain", "Watched resource content"),
}
TEMPLATE = "test://template/{id}/data"


async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri, name=title, description=f"{title} for testing", mime_type=mime)
            for uri, (title, mime, _) in STATIC.items()
        ]
    )


async def list_templates(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template=TEMPLATE,
                name="Resource Template",
                description="A resource template with parameter substitution",
                mime_type="application/json",
            )
        ]
    )


async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri in STATIC:
        _, mime, body = STATIC[uri]
        if body is None:
            return types.ReadResourceResult(contents=[types.BlobResourceContents(uri=uri, mime_type=mime, blob=PNG)])
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=body)])
    prefix, suffix = "test://template/", "/data"
    if uri.startswith(prefix) and uri.endswith(suffix) and len(uri) > len(prefix) + len(suffix):
        rid = uri[len(prefix) : -len(suffix)]
        body = json.dumps({"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=body)]
        )
    # 2026-07-28 (SEP-2164) says -32602; the handshake era's code is -32002.
    code = types.INVALID_PARAMS if modern(ctx) else -32002
    raise MCPError(code=code, message="Resource not found", data={"uri": uri})


async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with image content"),
    types.Prompt(name="test_input_required_result_prompt", description="A prompt that asks the user first"),
]


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(
    ctx: Ctx, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    args = params.arguments or {}
    match params.name:
        case "test_simple_prompt":
            messages = [user(text("This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            messages = [user(text(f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"))]
        case "test_prompt_with_embedded_resource":
            res = types.TextResourceContents(
                uri=args.get("resourceUri", "test://example-resource"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            messages = [
                user(types.EmbeddedResource(type="resource", resource=res)),
                user(text("Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            messages = [
                user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
                user(text("Please analyze the image above.")),
            ]
        case "test_input_required_result_prompt":
            got = await multi_round(ctx, params.name, params.input_responses, params.request_state)
            if isinstance(got, types.InputRequiredResult):
                return got
            messages = [user(text(f"Prompt with context: {summary(got)}"))]
        case other:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {other}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    pool = {"arg1": ["paris", "park", "party"], "arg2": ["world", "wonder"], "id": ["1", "123", "42"]}
    values = [v for v in pool.get(params.argument.name, []) if v.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def build_server() -> Server[Any]:
    hint = CacheHint(ttl_ms=300_000, scope="public")
    server: Server[Any] = Server(
        NAME,
        version="1.0.0",
        cache_hints={
            "tools/list": hint,
            "prompts/list": hint,
            "resources/list": hint,
            "resources/templates/list": hint,
            "resources/read": CacheHint(ttl_ms=60_000, scope="private"),
        },
        get_tool_input_schema=TOOL_SCHEMAS.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
    )
    # Seals every outgoing requestState and verifies every echoed one (-32602 otherwise).
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=NAME))
    return server


class NdjsonListen:
    """ASGI wrapper: answers `subscriptions/listen` as newline-delimited JSON in an
    `application/json` body that stays open (one message per line, sent as it comes), as
    some modern-era servers frame that stream, instead of the SDK's server-sent events."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope.get("type") == "http" else {}
        if headers.get(b"mcp-method") != b"subscriptions/listen":
            await self.app(scope, receive, send)
            return
        pending = b""
        reframe = False

        async def reframed(message: dict[str, Any]) -> None:
            nonlocal pending, reframe
            if message["type"] == "http.response.start":
                fields = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-type"]
                reframe = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                              for k, v in message.get("headers", []))
                if reframe:
                    fields = [(k, v) for k, v in fields if k.lower() != b"content-length"]
                    fields.append((b"content-type", b"application/json"))
                    message = {**message, "headers": fields}
            elif message["type"] == "http.response.body" and reframe:
                pending += message.get("body", b"")
                lines, _, pending = pending.rpartition(b"\n")
                out = b"".join(line[5:].strip() + b"\n" for line in lines.split(b"\n")
                               if line.startswith(b"data:") and line[5:].strip())
                message = {**message, "body": out}
            await send(message)

        await self.app(scope, receive, reframed)


async def serve(port: int, listen_framing: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    app = build_server().streamable_http_app(host="127.0.0.1")
    if listen_framing == "ndjson":
        app = NdjsonListen(app)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default: any free one)")
    parser.add_argument(
        "--listen-framing",
        choices=["sse", "ndjson"],
        default="sse",
        help="how subscriptions/listen streams are framed: server-sent events (the SDK's) or "
        "newline-delimited JSON in an application/json body",
    )
    args = parser.parse_args()
    try:
        anyio.run(serve, args.port, args.listen_framing)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
