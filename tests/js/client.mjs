// The scenario's client (editor side) written on the TypeScript ACP SDK (@agentclientprotocol/sdk). It runs
// what tests/peers/sdk_client.py runs and prints the same one-line JSON result, so the Python tests judge
// either with tests/peers/scenario.py's assert_scenario.
//
//   node client.mjs --file PATH [--timeout S] --connect URL   a remote agent: ws:// or wss:// through the
//                                                             SDK's ws-client (Node 20 has no global
//                                                             WebSocket: the `ws` package), http:// or
//                                                             https:// through its http-client
//   node client.mjs --file PATH [--timeout S] -- CMD [ARG...] spawn CMD as a stdio agent (ndJsonStream)
//
// Scenario: initialize, session/new, "hello PATH" (permission: allow-once; fs/read_text_file served from
// disk), "slow" cancelled after its first chunk, session/load. Exit 0 with the JSON on stdout, or 1 with one
// line on stderr.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";

function parseArgs(argv) {
  const args = { file: null, timeout: 30, connect: null, command: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") {
      args.command = argv.slice(i + 1);
      break;
    } else if (arg === "--file") args.file = resolve(argv[++i]);
    else if (arg === "--timeout") args.timeout = Number(argv[++i]);
    else if (arg === "--connect") args.connect = argv[++i];
    else throw new Error(`unknown argument ${JSON.stringify(arg)}`);
  }
  if (!args.connect && args.command.length === 0) throw new Error("give --connect URL or -- CMD [ARG...]");
  return args;
}

/** Client-side handlers: allow every permission, serve file reads, keep every update with its phase. */
class Recorder {
  phase = "setup";
  updates = [];
  phases = [];
  permissionRequests = 0;
  fileReads = 0;
  firstChunk = new Map();

  chunkSeen(phase) {
    if (!this.firstChunk.has(phase)) {
      let open;
      const promise = new Promise((resolve) => (open = resolve));
      this.firstChunk.set(phase, { promise, open });
    }
    return this.firstChunk.get(phase);
  }

  app() {
    return client({ name: "ts-test-client" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params.update);
        this.phases.push(this.phase);
        if (params.update.sessionUpdate === "agent_message_chunk") this.chunkSeen(this.phase).open();
      })
      .onRequest("session/request_permission", ({ params }) => {
        this.permissionRequests++;
        const choice =
          params.options.find((o) => o.optionId === "allow-once") ?? params.options.find((o) => o.kind === "allow_once");
        return { outcome: { outcome: "selected", optionId: choice.optionId } };
      })
      .onRequest("fs/read_text_file", ({ params }) => {
        this.fileReads++;
        let text = readFileSync(params.path, "utf8");
        if (params.line != null || params.limit != null) {
          const lines = text.split(/(?<=\n)/);
          const start = Math.max((params.line ?? 1) - 1, 0);
          text = lines.slice(start, params.limit != null ? start + params.limit : undefined).join("");
        }
        return { content: text };
      });
  }

  updatesIn(phase) {
    return this.updates.filter((_, i) => this.phases[i] === phase);
  }
}

async function drive(ctx, rec, file) {
  const init = await ctx.request("initialize", {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true } },
    clientInfo: { name: "ts-test-client", version: "0.1.0" },
  });
  if (init.protocolVersion !== PROTOCOL_VERSION) throw new Error(`agent negotiated ${init.protocolVersion}`);
  const { sessionId } = await ctx.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  const prompt = (text) => ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  const stopReasons = [];

  rec.phase = "hello";
  stopReasons.push((await prompt(file ? `hello ${file}` : "hello")).stopReason);

  rec.phase = "slow";
  const slow = prompt("slow");
  const first = await Promise.race([slow.then(() => "done"), rec.chunkSeen("slow").promise.then(() => "chunk")]);
  if (first === "chunk") await ctx.notify("session/cancel", { sessionId });
  stopReasons.push((await slow).stopReason);

  rec.phase = "load";
  await ctx.request("session/load", { sessionId, cwd: process.cwd(), mcpServers: [] });
  // Over Streamable HTTP both SDK servers answer session/load on the connection's SSE stream and replay on
  // the session's, so the answer can overtake the replay: wait until updates stop (quiet 300 ms, 3 s at most).
  for (let waited = 0, seen = -1; seen !== rec.updates.length && waited < 3000; waited += 300) {
    seen = rec.updates.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  rec.phase = "closing";
  return {
    session_id: sessionId,
    stop_reasons: stopReasons,
    agent_text: rec
      .updatesIn("hello")
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => u.content.text ?? "")
      .join(""),
    updates: rec.updates,
    permission_requests: rec.permissionRequests,
    file_reads: rec.fileReads,
    load_updates: rec.updatesIn("load"),
  };
}

/** `ws`'s WebSocket, remembering its sockets: the SDK closes them, and we wait for the closing handshake. */
const sockets = [];
class TrackedWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    sockets.push(this);
  }
}

async function remote(args, rec) {
  const stream = /^wss?:/.test(args.connect)
    ? createWebSocketStream(args.connect, { WebSocket: TrackedWebSocket })
    : createHttpStream(args.connect);
  const result = await rec.app().connectWith(stream, (ctx) => drive(ctx, rec, args.file));
  // The SDK sends the close frame; exiting at once would cut the handshake (the server would see 1006).
  const closed = sockets.map((ws) => ws.readyState === WebSocket.CLOSED || new Promise((r) => ws.once("close", r)));
  await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, 2000))]);
  return { ...result, agent_exit_code: 0 };
}

async function stdio(args, rec) {
  const child = spawn(args.command[0], args.command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve(code ?? 128 + (signal ? 15 : 0)));
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const result = await rec.app().connectWith(stream, (ctx) => drive(ctx, rec, args.file));
  child.stdin.end(); // EOF: the agent (or the relay in front of it) ends
  return { ...result, agent_exit_code: await exited };
}

async function main() {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`ts client: ${error.message}\n`);
    return 2;
  }
  const rec = new Recorder();
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no result within ${args.timeout} s`)), args.timeout * 1000);
  });
  try {
    const result = await Promise.race([args.connect ? remote(args, rec) : stdio(args, rec), deadline]);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    if (result.agent_exit_code !== 0) {
      process.stderr.write(`ts client: FAILED: agent exited with ${result.agent_exit_code}\n`);
      return 1;
    }
    return 0;
  } catch (error) {
    process.stderr.write(`ts client: FAILED: ${error?.stack ?? error}\n`);
    return 1;
  } finally {
    clearTimeout(timer);
  }
}

process.exitCode = await main();
process.exit(process.exitCode);
