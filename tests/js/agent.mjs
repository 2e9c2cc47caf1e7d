// The scenario's agent written on the TypeScript ACP SDK (@agentclientprotocol/sdk), so the relay meets a
// second real implementation. It behaves like tests/peers/sdk_agent.py (the same prompts, updates and ids),
// so tests/peers/scenario.py's assert_scenario judges either.
//
//   node agent.mjs --listen   serve /acp on 127.0.0.1 (a free port) with the SDK's experimental AcpServer:
//                             Streamable HTTP through its node adapter, WebSocket through `ws`. Prints the
//                             port on stdout once it listens; runs until killed.
//   node agent.mjs --stdio    speak NDJSON on stdin/stdout (the SDK's ndJsonStream); exits at stdin EOF.
//
// Prompts: "hello PATH" (three chunks, tool call call-N, a permission request, fs/read_text_file of PATH, the
// tool call completed with the file's text, one more chunk, end_turn); "slow" (one chunk, then waits for
// session/cancel, never for a clock: cancelled); anything else (one chunk, end_turn). session/load replays history.
import http from "node:http";
import { Readable, Writable } from "node:stream";
import { agent, ndJsonStream, RequestError, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } from "@agentclientprotocol/sdk/experimental/node";
import { WebSocketServer } from "ws";

const OPTIONS = [
  { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
  { optionId: "reject-once", name: "Reject", kind: "reject_once" },
];

/** One agent app with its own sessions: the server builds one per ACP connection. */
function createAgent() {
  const sessions = new Map();
  let nextSession = 0;
  let nextMessage = 0;
  const messageId = (prefix) => `${prefix}-${++nextMessage}`;

  const lookup = (sessionId) => {
    const session = sessions.get(sessionId);
    if (!session) throw RequestError.invalidParams({ sessionId, reason: "unknown session" });
    return session;
  };
  const send = async (client, session, update) => {
    session.history.push(update);
    await client.notify("session/update", { sessionId: session.id, update });
  };
  const say = async (client, session, id, ...parts) => {
    for (const text of parts) {
      await send(client, session, { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, messageId: id });
    }
  };

  async function helloTurn(client, session, path) {
    await say(client, session, messageId("msg"), "Hello", " from the", " SDK agent.");
    const callId = `call-${++session.toolCalls}`;
    await send(client, session, {
      sessionUpdate: "tool_call",
      toolCallId: callId,
      title: "Read notes",
      kind: "read",
      status: "pending",
      locations: [{ path: path || "<no path>" }],
      rawInput: { path: path || "<no path>" },
    });
    const permission = await client.request("session/request_permission", {
      sessionId: session.id,
      toolCall: { toolCallId: callId, title: "Read notes", kind: "read", status: "pending" },
      options: OPTIONS,
    });
    const allowed = permission.outcome.outcome === "selected" && permission.outcome.optionId === "allow-once";
    const failed = async (why) => {
      await send(client, session, { sessionUpdate: "tool_call_update", toolCallId: callId, status: "failed" });
      await say(client, session, messageId("msg"), why);
    };
    if (!allowed) await failed(" Permission denied.");
    else if (!path.startsWith("/")) await failed(" No absolute file path given.");
    else {
      let read;
      try {
        read = await client.request("fs/read_text_file", { sessionId: session.id, path });
      } catch {
        await failed(" File read failed.");
        return { stopReason: "end_turn" };
      }
      await send(client, session, {
        sessionUpdate: "tool_call_update",
        toolCallId: callId,
        status: "completed",
        content: [{ type: "content", content: { type: "text", text: read.content } }],
      });
      await say(client, session, messageId("msg"), " File read complete.");
    }
    return { stopReason: "end_turn" };
  }

  async function slowTurn(client, session) {
    const id = messageId("msg");
    const cancelled = new Promise((resolve) => {
      session.cancel = resolve; // set before the chunk goes out: the cancel it prompts cannot come first
    });
    await say(client, session, id, "Working slowly...");
    await cancelled;
    return { stopReason: "cancelled" };
  }

  return agent({ name: "ts-test-agent" })
    .onRequest("initialize", () => ({
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: { loadSession: true },
      agentInfo: { name: "ts-test-agent", title: "TypeScript SDK test agent", version: "0.1.0" },
    }))
    .onRequest("session/new", ({ params }) => {
      const id = `sess-${++nextSession}`;
      sessions.set(id, { id, cwd: params.cwd, history: [], toolCalls: 0, cancel: null });
      return { sessionId: id };
    })
    .onRequest("session/load", async ({ params, client }) => {
      const session = lookup(params.sessionId);
      for (const update of [...session.history]) {
        await client.notify("session/update", { sessionId: session.id, update });
      }
      return {};
    })
    .onNotification("session/cancel", ({ params }) => {
      sessions.get(params.sessionId)?.cancel?.();
    })
    .onRequest("session/prompt", async ({ params, client }) => {
      const session = lookup(params.sessionId);
      const text = params.prompt.map((block) => block.text ?? "").join("").trim();
      session.history.push({
        sessionUpdate: "user_message_chunk",
        content: { type: "text", text },
        messageId: messageId("user"),
      });
      try {
        const [word, ...rest] = text.split(" ");
        if (word === "hello") return await helloTurn(client, session, rest.join(" ").trim());
        if (word === "slow") return await slowTurn(client, session);
        await say(client, session, messageId("msg"), "I only understand 'hello' and 'slow'.");
        return { stopReason: "end_turn" };
      } finally {
        session.cancel = null;
      }
    });
}

function serveStdio() {
  const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const connection = createAgent().connect(stream);
  connection.closed.then(() => process.exit(0));
}

function serveListen() {
  const acp = new AcpServer({ createAgent });
  const onHttp = createNodeHttpHandler(acp);
  const wss = new WebSocketServer({ noServer: true });
  const onUpgrade = createNodeWebSocketUpgradeHandler(acp, wss);
  const server = http.createServer((req, res) => {
    if (new URL(req.url ?? "/", "http://x").pathname !== "/acp") {
      res.writeHead(404).end();
      return;
    }
    onHttp(req, res);
  });
  server.on("upgrade", (req, socket, head) => {
    if (new URL(req.url ?? "/", "http://x").pathname !== "/acp") {
      socket.destroy();
      return;
    }
    onUpgrade(req, socket, head);
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${server.address().port}\n`);
  });
  for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => acp.close().finally(() => process.exit(0)));
  }
}

const mode = process.argv[2];
if (mode === "--stdio") serveStdio();
else if (mode === "--listen") serveListen();
else {
  process.stderr.write("usage: node agent.mjs --listen | --stdio\n");
  process.exit(2);
}
