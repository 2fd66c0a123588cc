"""The hostile stdio upstream of the "nothing leaks" suite (tests/leaks.rs).

An MCP server over stdio that fails every request the way its name says (a tool,
prompt, resource URI `leak://<kind>` or list cursor named after a kind of the plan),
with the planted secrets the plan (a JSON file written by the test, see
tests/it/support/planted.rs) gives for that kind. On the side it writes secrets to stderr
at start and for every request, writes lines that are not JSON-RPC to stdout, answers
under ids nobody asked for, and the tool `crash` dies with secrets as its last words.

    leaky_stdio.py PLAN RECORD_DIR [--fail-init | --crash-init]

It records, for the test to inspect, its environment (RECORD_DIR/env-PID.json) and every
byte it reads on stdin (RECORD_DIR/stdin-PID.bin). Only the standard library is used.
"""

import json
import os
import sys

plan_path, record_dir = sys.argv[1], sys.argv[2]
fail_init = "--fail-init" in sys.argv
crash_init = "--crash-init" in sys.argv

with open(plan_path) as f:
    plan = json.load(f)
kinds = plan["kinds"]
last_words = plan["last_words"]

pid = os.getpid()
with open(os.path.join(record_dir, "env-%d.json" % pid), "w") as f:
    json.dump(dict(os.environ), f)
stdin_record = open(os.path.join(record_dir, "stdin-%d.bin" % pid), "ab")

out = sys.stdout


def send(message):
    out.write(json.dumps(message) + "\n")
    out.flush()


def say(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def die(code):
    say(last_words)
    out.write("fatal: " + last_words.replace("\n", " | ") + "\n")
    out.flush()
    os._exit(code)


say("leaky stdio upstream starting; DATABASE_URL=postgres://app_user:hunter2@db.internal:5432/orders")
names = list(kinds)


def kind_of(method, params):
    if method in ("tools/call", "prompts/get"):
        return params.get("name")
    if method == "resources/read":
        uri = params.get("uri", "")
        return uri[len("leak://"):] if uri.startswith("leak://") else None
    return params.get("cursor")


def answer(msg):
    method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    if rid is None or method is None:
        return
    ok = lambda result: send({"jsonrpc": "2.0", "id": rid, "result": result})
    fail = lambda error: send({"jsonrpc": "2.0", "id": rid, "error": error})
    if method == "initialize":
        if crash_init:
            die(5)
        if fail_init:
            return fail(kinds["e_32603"]["turns"][0]["error"])
        return ok({"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                   "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                   "serverInfo": {"name": "leaky-stdio", "version": "1"}})
    if method == "ping":
        return ok({})
    if "cursor" not in params:
        if method == "tools/list":
            return ok({"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in names + ["crash"]]})
        if method == "prompts/list":
            return ok({"prompts": [{"name": n} for n in names]})
        if method == "resources/list":
            return ok({"resources": []})
        if method == "resources/templates/list":
            return ok({"resourceTemplates": [{"uriTemplate": "leak://{kind}", "name": "leak"}]})
    if method == "tools/call" and params.get("name") == "crash":
        die(7)
    name = kind_of(method, params)
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        return fail({"code": -32601, "message": "Method not found"})
    methods = plan["methods"]
    this = kind["turns"][methods.index(method) if method in methods else 0]
    say("request %s failed: %s" % (name, this["noise"]))
    if kind["tool_result"] and method == "tools/call":
        return ok(this["result"])
    if kind["garbage"]:
        out.write("not json: " + this["noise"].replace("\n", " ") + "\n")
    if kind["wrong_type"]:
        send({"debug": this["noise"]})
    if kind["unknown_id"]:
        send({"jsonrpc": "2.0", "id": "nobody-asked", "error": this["error"]})
    error = this["error"]
    fail(error)
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(error.get("message"), str):
        # A malformed error is no answer: answer properly too, so the call ends.
        fail(kinds["e_32603"]["turns"][0]["error"])


while True:
    raw = sys.stdin.buffer.readline()
    if not raw:
        break
    stdin_record.write(raw)
    stdin_record.flush()
    try:
        msg = json.loads(raw)
    except ValueError:
        continue
    if isinstance(msg, dict):
        answer(msg)
