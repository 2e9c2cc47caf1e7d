"""A scripted ACP v1 client (editor side) built on the PyPI `agent-client-protocol` SDK.

Run: ``python tests/peers/sdk_client.py [--file PATH] [--timeout S] -- AGENT_CMD [ARGS...]``
(or ``--connect URL`` instead of the command: a remote agent, through the SDK's WebSocket or HTTP client)

Spawns AGENT_CMD (full environment inherited, agent stderr passed through to ours), then:
initialize -> session/new -> prompt "hello PATH" (permission: allow-once; fs/read_text_file served from
disk) -> prompt "slow" + session/cancel after its first chunk -> session/load of the same session.
Prints ONE JSON object on stdout; exit 0 on success, 1 (message on stderr) on failure.
Without ``--file`` the prompt is plain "hello" and the agent falls back to ``$SDK_AGENT_FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import quick_sdk  # noqa: F401  (before the SDK: see quick_sdk.py)

# isort: split
from acp import (
    PROTOCOL_VERSION,
    ReadTextFileResponse,
    RequestPermissionResponse,
    spawn_agent_process,
    text_block,
)
from acp.interfaces import Agent
from acp.schema import AllowedOutcome, ClientCapabilities, FileSystemCapabilities, Implementation, PermissionOption


class RecordingClient:
    """Client-side handlers: allow every permission, serve file reads, record every update."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.updates: list[dict[str, Any]] = []
        self.phases: list[str] = []
        self.permission_requests = 0
        self.file_reads = 0
        self.first_chunk: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Agent) -> None:
        """Nothing to keep: the scenario drives the connection returned by the spawn helper."""

    def updates_in(self, phase: str) -> list[dict[str, Any]]:
        return [u for u, p in zip(self.updates, self.phases, strict=True) if p == phase]

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        data = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.updates.append(data)
        self.phases.append(self.phase)
        if data.get("sessionUpdate") == "agent_message_chunk":
            self.first_chunk.setdefault(self.phase, asyncio.Event()).set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests += 1
        choice = next((o for o in options if o.option_id == "allow-once"), None)
        choice = choice or next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=choice.option_id))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self.file_reads += 1
        text = Path(path).read_text(encoding="utf-8")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit if limit is not None else None])
        return ReadTextFileResponse(content=text)


def _agent_text(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"].get("text", "") for u in updates if u.get("sessionUpdate") == "agent_message_chunk")


async def run_scenario(agent_cmd: list[str], file_path: str | None) -> dict[str, Any]:
    """Drive the whole scenario against a freshly spawned agent; return the result summary."""
    client = RecordingClient()
    # Inherit the full environment (the SDK default trims it to HOME/PATH/...), and let the agent's
    # stderr through: the SDK default is an undrained PIPE that can block a chatty agent. The SDK sends
    # SIGTERM to an agent still running 2 s after its stdin closed: a loaded machine's relay took longer
    # (agent_exit_code -15, or ProcessLookupError when it ended meanwhile), so only a hung one is ended.
    async with (
        spawn_agent_process(
            client,  # type: ignore[arg-type]  # the SDK Client protocol lists methods this peer does not need
            agent_cmd[0],
            *agent_cmd[1:],
            env=dict(os.environ),
            transport_kwargs={"stderr": None, "shutdown_timeout": 120.0},
        ) as (conn, process)
    ):
        result = await drive(conn, client, file_path)
    # Leaving the context closed the agent's stdin and waited for it to exit.
    return {**result, "agent_exit_code": process.returncode}


async def run_remote(url: str, file_path: str | None) -> dict[str, Any]:
    """The same scenario against a remote agent, through the SDK's own WebSocket or Streamable HTTP client."""
    from acp import connect_to_agent

    if url.startswith(("ws:", "wss:")):
        from acp.ws import create_websocket_stream

        transport = await create_websocket_stream(url)
    else:
        from acp.http import create_http_stream

        transport = create_http_stream(url)
    client = RecordingClient()
    conn = connect_to_agent(client, transport)  # type: ignore[arg-type]  # the SDK Client protocol lists methods this peer does not need
    try:
        result = await drive(conn, client, file_path)
    finally:
        await conn.close()
        await transport.close()
    return {**result, "agent_exit_code": 0}


async def drive(conn: Any, client: RecordingClient, file_path: str | None) -> dict[str, Any]:
    """initialize, session/new, the hello turn (permission, fs read), the slow turn cancelled, session/load."""
    stop_reasons: list[str] = []
    if True:  # (indented as it was inside run_scenario's `async with`)
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True)),
            client_info=Implementation(name="sdk-test-client", version="0.1.0"),
        )
        if init.protocol_version != PROTOCOL_VERSION:
            raise RuntimeError(f"agent negotiated protocolVersion {init.protocol_version}")
        session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id

        client.phase = "hello"
        hello = f"hello {file_path}" if file_path else "hello"
        stop_reasons.append((await conn.prompt(session_id=session_id, prompt=[text_block(hello)])).stop_reason)

        client.phase = "slow"
        chunk_seen = client.first_chunk.setdefault("slow", asyncio.Event())
        slow = asyncio.create_task(conn.prompt(session_id=session_id, prompt=[text_block("slow")]))
        seen = asyncio.create_task(chunk_seen.wait())
        done, _ = await asyncio.wait({slow, seen}, return_when=asyncio.FIRST_COMPLETED)
        seen.cancel()
        if slow not in done:
            await conn.cancel(session_id=session_id)
        stop_reasons.append((await slow).stop_reason)

        client.phase = "load"
        await conn.load_session(cwd=os.getcwd(), session_id=session_id, mcp_servers=[])
        await asyncio.sleep(0)  # let already-received notification tasks finish before closing
        client.phase = "closing"
    return {
        "session_id": session_id,
        "stop_reasons": stop_reasons,
        "agent_text": _agent_text(client.updates_in("hello")),
        "updates": client.updates,
        "permission_requests": client.permission_requests,
        "file_reads": client.file_reads,
        "load_updates": client.updates_in("load"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", help="absolute path the agent should read (sent in the hello prompt)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="overall deadline in seconds (only ends a run that hangs)"
    )
    parser.add_argument("--connect", metavar="URL", help="a remote agent (ws:// or http://) instead of AGENT_CMD")
    parser.add_argument("agent_cmd", nargs=argparse.REMAINDER, help="-- AGENT_CMD [ARGS...]")
    args = parser.parse_args(argv)
    agent_cmd = args.agent_cmd[1:] if args.agent_cmd[:1] == ["--"] else args.agent_cmd
    if not agent_cmd and not args.connect:
        parser.error("missing agent command after -- (or --connect URL)")
    file_path = os.path.abspath(args.file) if args.file else None
    scenario = run_remote(args.connect, file_path) if args.connect else run_scenario(agent_cmd, file_path)
    try:
        result = asyncio.run(asyncio.wait_for(scenario, args.timeout))
    except Exception as exc:
        print(f"sdk_client: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(result) + "\n")
    if result["agent_exit_code"] != 0:
        print(f"sdk_client: FAILED: agent exited with {result['agent_exit_code']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
