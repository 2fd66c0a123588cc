"""A stdio MCP server that misbehaves the way real ones do: it prints junk on stdout,
chatters on stderr, and with --stubborn ignores both the end of stdin and SIGTERM.

It records its pid, the names of its environment variables and the capabilities it was
offered at initialize into the JSON file named by NOISY_RECORD, so tests can check what the gateway told it and whether the
process is gone after shutdown. Only the Python standard library is used.
"""

import json
import os
import signal
import sys
import time

stubborn = "--stubborn" in sys.argv
record_path = os.environ.get("NOISY_RECORD")


def record(**fields):
    if not record_path:
        return
    data = {}
    if os.path.exists(record_path):
        with open(record_path) as f:
            data = json.load(f)
    data.update(fields)
    with open(record_path, "w") as f:
        json.dump(data, f)


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if stubborn:
    signal.signal(signal.SIGTERM, lambda *_: sys.stderr.write("noisy: ignoring SIGTERM\n"))

record(pid=os.getpid(), env=sorted(os.environ))
sys.stdout.write("noisy server starting up (this line is not JSON-RPC)\n")
sys.stdout.flush()
sys.stderr.write("noisy: ready\n")
sys.stderr.flush()

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method = msg.get("method")
    sys.stderr.write(f"noisy: got {method}\n")
    sys.stderr.flush()
    if "id" not in msg:
        continue
    if method == "initialize":
        record(capabilities=msg["params"].get("capabilities"))
        sys.stdout.write("{ this is not json either\n")
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "noisy", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": [
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}]}})
    elif method == "tools/call":
        sys.stdout.write("progress: 50% (junk between messages)\n")
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "content": [{"type": "text", "text": msg["params"]["arguments"].get("message", "")}]}})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})

sys.stderr.write("noisy: stdin closed\n")
sys.stderr.flush()
while stubborn:
    time.sleep(0.1)
