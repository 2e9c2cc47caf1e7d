"""A small, deterministic ACP v1 agent built on the PyPI `agent-client-protocol` SDK.

Run: ``python tests/peers/sdk_agent.py`` (speaks NDJSON JSON-RPC on stdin/stdout; logs on stderr).

Prompts it understands (text of the prompt's text blocks, joined):
  * ``hello [ABS_PATH]`` - streams "Hello from the SDK agent.", starts tool call ``call-N`` (read),
    asks ``session/request_permission``, and if allowed reads ABS_PATH (or ``$SDK_AGENT_FILE`` when
    no path is given) with ``fs/read_text_file``, completes the tool call with the file content,
    streams " File read complete." and ends with ``end_turn``.
  * ``slow`` - streams one chunk, then waits for ``session/cancel`` (-> ``cancelled``): for the event, never
    a clock, so a loaded machine cannot turn it into ``end_turn``.
  * anything else - one chunk, ``end_turn``.
Environment knobs for `acp-relay rerun` tests: ``SDK_AGENT_VARIANT=1`` says something else in ``hello``;
``SDK_AGENT_DIE_AT_TURN=N`` exits with status 3 when the process's N-th prompt arrives;
``SDK_AGENT_HANG_AT_TURN=N`` never ends the N-th prompt (until cancelled);
``SDK_AGENT_RANDOM_IDS=1`` makes up a fresh UUID for every ``session/new``, as real agents do;
``SDK_AGENT_STAMP_TITLES=1`` puts the path and the time into the permission request's title, as real agents do.
``session/load`` replays the session's recorded history as ``session/update`` notifications, then
responds ``{}``. The process exits when stdin reaches EOF.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import quick_sdk  # noqa: F401  (before the SDK: see quick_sdk.py)

# isort: split
from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_read_tool_call,
    text_block,
    tool_content,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AllowedOutcome,
    Implementation,
    PermissionOption,
    ToolCallUpdate,
    UserMessageChunk,
)

log = logging.getLogger("sdk_agent")

PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
]


@dataclass
class Session:
    """Per-session state: replayable history and the cancel signal of the running turn."""

    session_id: str
    cwd: str
    history: list[Any] = field(default_factory=list)
    cancel_event: asyncio.Event | None = None
    tool_calls: int = 0


class SdkTestAgent:
    """Implements the agent side of ACP v1 (the SDK's duck-typed ``acp.Agent`` protocol)."""

    def __init__(self) -> None:
        self._conn: Client | None = None
        self._sessions: dict[str, Session] = {}
        self._next_session = 0
        self._next_message = 0
        self._prompts = 0

    def on_connect(self, conn: Client) -> None:
        """Keep the agent-side connection: it is how we call the client."""
        self._conn = conn

    @property
    def client(self) -> Client:
        assert self._conn is not None, "on_connect was not called"
        return self._conn

    # --- helpers -------------------------------------------------------------------------------

    def _message_id(self, prefix: str) -> str:
        self._next_message += 1
        return f"{prefix}-{self._next_message}"

    async def _send(self, session: Session, update: Any) -> None:
        """Send one session/update and remember it for session/load replay."""
        session.history.append(update)
        await self.client.session_update(session_id=session.session_id, update=update)

    async def _say(self, session: Session, message_id: str, *parts: str) -> None:
        for part in parts:
            chunk = AgentMessageChunk(
                session_update="agent_message_chunk", content=text_block(part), message_id=message_id
            )
            await self._send(session, chunk)

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})
        return session

    # --- ACP methods (client -> agent) ----------------------------------------------------------

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        log.info("initialize protocolVersion=%s", protocol_version)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name="sdk-test-agent", title="SDK test agent", version="0.1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self._next_session += 1
        session_id = str(uuid.uuid4()) if os.environ.get("SDK_AGENT_RANDOM_IDS") else f"sess-{self._next_session}"
        self._sessions[session_id] = Session(session_id=session_id, cwd=cwd)
        log.info("new session %s cwd=%s", session_id, cwd)
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        session = self._session(session_id)
        log.info("load session %s: replaying %d updates", session_id, len(session.history))
        for update in list(session.history):
            await self.client.session_update(session_id=session_id, update=update)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        log.info("cancel %s", session_id)
        if session is not None and session.cancel_event is not None:
            session.cancel_event.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        self._prompts += 1
        if os.environ.get("SDK_AGENT_DIE_AT_TURN") == str(self._prompts):
            print(f"sdk_agent: dying in turn {self._prompts} (SDK_AGENT_DIE_AT_TURN)", file=sys.stderr, flush=True)
            os._exit(3)
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        log.info("prompt %s: %r", session_id, text)
        user_chunk = UserMessageChunk(
            session_update="user_message_chunk", content=text_block(text), message_id=self._message_id("user")
        )
        session.history.append(user_chunk)  # history only: v1 agents need not echo the prompt live
        session.cancel_event = asyncio.Event()
        try:
            word, _, rest = text.partition(" ")
            if os.environ.get("SDK_AGENT_HANG_AT_TURN") == str(self._prompts):
                await session.cancel_event.wait()
                return PromptResponse(stop_reason="cancelled")
            if word == "hello":
                return await self._hello_turn(session, rest.strip() or os.environ.get("SDK_AGENT_FILE", ""))
            if word == "slow":
                return await self._slow_turn(session)
            await self._say(session, self._message_id("msg"), "I only understand 'hello' and 'slow'.")
            return PromptResponse(stop_reason="end_turn")
        finally:
            session.cancel_event = None

    # --- turns -----------------------------------------------------------------------------------

    async def _hello_turn(self, session: Session, path: str) -> PromptResponse:
        name = " changed agent." if os.environ.get("SDK_AGENT_VARIANT") else " SDK agent."
        await self._say(session, self._message_id("msg"), "Hello", " from the", name)
        session.tool_calls += 1
        call_id = f"call-{session.tool_calls}"
        await self._send(session, start_read_tool_call(call_id, "Read notes", path or "<no path>"))

        title = f"Read {path} at {time.time_ns()}" if os.environ.get("SDK_AGENT_STAMP_TITLES") else "Read notes"
        permission = await self.client.request_permission(
            session_id=session.session_id,
            tool_call=ToolCallUpdate(tool_call_id=call_id, title=title, kind="read", status="pending"),
            options=PERMISSION_OPTIONS,
        )
        allowed = isinstance(permission.outcome, AllowedOutcome) and permission.outcome.option_id == "allow-once"
        if not allowed:
            await self._send(session, update_tool_call(call_id, status="failed"))
            await self._say(session, self._message_id("msg"), " Permission denied.")
        elif not os.path.isabs(path):
            await self._send(session, update_tool_call(call_id, status="failed"))
            await self._say(session, self._message_id("msg"), " No absolute file path given.")
        else:
            try:
                read = await self.client.read_text_file(session_id=session.session_id, path=path)
            except RequestError as exc:
                log.warning("fs/read_text_file failed: %s", exc)
                await self._send(session, update_tool_call(call_id, status="failed"))
                await self._say(session, self._message_id("msg"), " File read failed.")
            else:
                done = update_tool_call(call_id, status="completed", content=[tool_content(text_block(read.content))])
                await self._send(session, done)
                await self._say(session, self._message_id("msg"), " File read complete.")
        return PromptResponse(stop_reason="end_turn")

    async def _slow_turn(self, session: Session) -> PromptResponse:
        assert session.cancel_event is not None
        message_id = self._message_id("msg")
        await self._say(session, message_id, "Working slowly...")
        await session.cancel_event.wait()
        return PromptResponse(stop_reason="cancelled")


def _is_pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def serve() -> None:
    """Serve ACP on stdio.

    The SDK's POSIX ``stdio_streams`` uses ``connect_read_pipe``/``connect_write_pipe``, which refuse
    regular files (e.g. ``> out.jsonl``); then fall back to the SDK's thread-fed reader + blocking
    stdout writer (its Windows path).
    """
    if _is_pipe_like(0) and _is_pipe_like(1):
        await run_agent(SdkTestAgent())  # type: ignore[arg-type]  # the SDK protocol lists every optional method; this peer implements the ones the scenario uses
        return
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    from acp.stdio import _windows_stdio_streams  # private, but stable within the pinned 0.12.x

    reader, writer = await _windows_stdio_streams(asyncio.get_running_loop(), DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    await run_agent(SdkTestAgent(), writer, reader)  # type: ignore[arg-type]  # the SDK protocol lists every optional method; this peer implements the ones the scenario uses


def main() -> None:
    """Run the agent on stdio until stdin reaches EOF."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="sdk_agent: %(message)s")
    asyncio.run(serve())
    log.info("stdin closed, exiting")


if __name__ == "__main__":
    main()
