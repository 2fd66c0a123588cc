// Preload for node (`node -r ./loopback.cjs SCRIPT ...`) used by seawall's interop tests.
//
// Reference servers such as @modelcontextprotocol/server-everything call
// `app.listen(PORT)`, which binds every interface. Tests must only ever bind loopback,
// and they run with PORT=0, so they also need to learn the port the kernel picked.
// This preload:
//   * forces every TCP `server.listen(...)` that names no host to bind 127.0.0.1
//     (an explicit host other than a loopback one is replaced too);
//   * prints `LISTENING <port>` on stderr once the server is bound (tests parse it).
// Unix-socket / pipe / handle listens are left alone.
"use strict";

const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const isLoopback = (h) => h === "127.0.0.1" || h === "localhost" || h === "::1";
const origListen = net.Server.prototype.listen;

function patchArgs(args) {
  if (args.length === 0) {
    return [0, LOOPBACK];
  }
  const first = args[0];
  if (first !== null && typeof first === "object") {
    // listen(options[, cb]); skip handles/fds/paths
    if ("path" in first || "fd" in first || "_handle" in first || "handle" in first) {
      return null;
    }
    const opts = { ...first };
    if (!isLoopback(opts.host)) opts.host = LOOPBACK;
    return [opts, ...args.slice(1)];
  }
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, cb])
    const port = Number(first);
    const rest = args.slice(1);
    if (typeof rest[0] === "string") {
      if (!isLoopback(rest[0])) rest[0] = LOOPBACK;
      return [port, ...rest];
    }
    return [port, LOOPBACK, ...rest];
  }
  if (typeof first === "function" || first === undefined) {
    // listen(cb) or listen(undefined, ...): random port
    return [0, LOOPBACK, ...args.slice(first === undefined ? 1 : 0)];
  }
  return null; // a pipe name or something exotic
}

net.Server.prototype.listen = function loopbackListen(...args) {
  const patched = patchArgs(args);
  if (patched === null) {
    return origListen.apply(this, args);
  }
  this.once("listening", () => {
    const addr = this.address();
    if (addr && typeof addr === "object") {
      process.stderr.write(`LISTENING ${addr.port}\n`);
    }
  });
  return origListen.apply(this, patched);
};
