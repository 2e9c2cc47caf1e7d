"""rerun's sans-I/O core against hand-written agent lines: answers, turn ends, cancels, timeouts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from acp_relay.rerun import Options, RerunCore, build_script
from acp_relay.rerun.core import DONE, TIMEOUT


def script(v2: bool = False, cancel_after: int | None = None) -> Any:
    sid = "rec"
    msgs: list[tuple[str, float, dict]] = [
        (
            "c2a",
            0.0,
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2 if v2 else 1}},
        ),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2 if v2 else 1}}),
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        (
            "c2a",
            1.0,
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
        ),
        (
            "a2c",
            1.1,
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "session/request_permission",
                "params": {
                    "sessionId": sid,
                    "toolCall": {"toolCallId": "t", "title": "Edit", "kind": "edit"},
                    "options": [{"optionId": "ok", "kind": "allow_once"}, {"optionId": "no", "kind": "reject_once"}],
                },
            },
        ),
        ("c2a", 1.2, {"jsonrpc": "2.0", "id": 5, "result": {"outcome": {"outcome": "selected", "optionId": "no"}}}),
        (
            "a2c",
            1.3,
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "fs/read_text_file",
                "params": {"sessionId": sid, "path": "/rec/a.txt"},
            },
        ),
        ("c2a", 1.4, {"jsonrpc": "2.0", "id": 6, "result": {"content": "recorded text"}}),
        (
            "a2c",
            1.5,
            {"jsonrpc": "2.0", "id": 7, "method": "terminal/create", "params": {"sessionId": sid, "command": "ls"}},
        ),
        ("c2a", 1.6, {"jsonrpc": "2.0", "id": 7, "result": {"terminalId": "term-1"}}),
        (
            "a2c",
            1.7,
            {
                "jsonrpc": "2.0",
                "id": 8,
                "method": "terminal/output",
                "params": {"sessionId": sid, "terminalId": "term-1"},
            },
        ),
        ("c2a", 1.8, {"jsonrpc": "2.0", "id": 8, "result": {"output": "a.txt\n", "truncated": False}}),
        ("a2c", 2.0, {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
        (
            "c2a",
            3.0,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "2"}]},
            },
        ),
    ]
    for i in range(cancel_after or 0):
        u = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(i)}}
        msgs.append(
            ("a2c", 3.1, {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
        )
    if cancel_after is not None:
        msgs.append(("c2a", 3.5, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
    return build_script(msgs, sid, 2 if v2 else 1)


class Agent:
    """Drive a core as an agent would; collect what the core sends."""

    def __init__(self, core: RerunCore) -> None:
        self.core, self.now = core, 0.0
        self.sent: list[dict] = []
        self.take(core.start(0.0))

    def take(self, frames: list[bytes]) -> list[dict]:
        msgs = [json.loads(f) for f in frames]
        self.sent += msgs
        return msgs

    def say(self, msg: dict) -> list[dict]:
        return self.take(self.core.receive(json.dumps({"jsonrpc": "2.0", **msg}).encode(), self.now))

    def ask(self, rid: int, method: str, params: dict) -> dict:
        (reply,) = [m for m in self.say({"id": rid, "method": method, "params": params}) if m.get("id") == rid]
        return reply

    def setup(self, sid: str = "live") -> dict:
        (new,) = self.say({"id": 0, "result": {"protocolVersion": 1}})
        assert new["method"] == "session/new" and new["params"]["cwd"] == (self.core.opt.cwd or "/rec")
        (prompt,) = self.say({"id": new["id"], "result": {"sessionId": sid}})
        assert prompt["method"] == "session/prompt" and prompt["params"]["sessionId"] == sid
        return prompt


def test_requests_are_answered_from_the_recording() -> None:
    agent = Agent(RerunCore(script(), Options(cwd="/live")))
    assert agent.sent[0]["method"] == "initialize"
    prompt = agent.setup()
    perm = {
        "sessionId": "live",
        "toolCall": {"toolCallId": "x9", "title": "Edit", "kind": "edit"},
        "options": [{"optionId": "yes", "kind": "allow_once"}, {"optionId": "nope", "kind": "reject_once"}],
    }
    # the recorded choice ("no", a reject_once) maps to the live option of the same kind
    assert agent.ask(40, "session/request_permission", perm)["result"]["outcome"] == {
        "outcome": "selected",
        "optionId": "nope",
    }
    # a second permission in the turn has no recorded match: --answer recorded denies
    perm2 = {**perm, "toolCall": {"toolCallId": "x10", "title": "Other", "kind": "edit"}}
    assert agent.ask(41, "session/request_permission", perm2)["result"]["outcome"]["optionId"] == "nope"
    # the live path under --cwd maps to the recorded path under the recorded cwd
    assert agent.ask(42, "fs/read_text_file", {"sessionId": "live", "path": "/live/a.txt"})["result"] == {
        "content": "recorded text"
    }
    assert agent.ask(43, "fs/read_text_file", {"sessionId": "live", "path": "/live/b.txt"})["error"]["code"] == -32002
    assert (
        agent.ask(44, "fs/write_text_file", {"sessionId": "live", "path": "/live/a.txt", "content": "x"})["result"]
        is None
    )
    assert agent.ask(45, "terminal/create", {"sessionId": "live", "command": "ls"})["result"] == {
        "terminalId": "term-1"
    }
    assert (
        agent.ask(46, "terminal/output", {"sessionId": "live", "terminalId": "term-1"})["result"]["output"] == "a.txt\n"
    )
    err = agent.ask(47, "terminal/create", {"sessionId": "live", "command": "rm", "args": ["-rf", "/"]})["error"]
    assert "`rm -rf /` was not recorded" in err["message"]
    err = agent.ask(48, "x/unknown", {})["error"]
    assert err["code"] == -32601 and "x/unknown" in err["message"]
    # the v1 turn ends at the prompt's response; the next prompt goes out with the live session id
    (nxt,) = agent.say({"id": prompt["id"], "result": {"stopReason": "end_turn"}})
    assert nxt["method"] == "session/prompt" and nxt["params"] == {
        "sessionId": "live",
        "prompt": [{"type": "text", "text": "2"}],
    }
    assert nxt["id"] != prompt["id"]
    assert agent.say({"id": nxt["id"], "result": {"stopReason": "end_turn"}}) == []
    assert agent.core.outcome == DONE and agent.core.completed == 2


def test_answer_allow_and_fs_none() -> None:
    agent = Agent(RerunCore(script(), Options(answer="allow", fs="none")))
    agent.setup()
    perm = {
        "sessionId": "live",
        "toolCall": {"title": "Unrecorded"},
        "options": [{"optionId": "r", "kind": "reject_once"}, {"optionId": "a", "kind": "allow_always"}],
    }
    assert agent.ask(1, "session/request_permission", perm)["result"]["outcome"]["optionId"] == "a"
    assert "--fs none" in agent.ask(2, "fs/read_text_file", {"path": "/rec/a.txt"})["error"]["message"]


def test_fs_real_reads_and_writes_under_cwd_only(tmp_path: Any) -> None:
    files: dict[str, str] = {"/live/a.txt": "one\ntwo\nthree\n"}
    core = RerunCore(
        script(), Options(cwd="/live", fs="real"), read_file=files.__getitem__, write_file=files.__setitem__
    )
    agent = Agent(core)
    agent.setup()
    assert agent.ask(1, "fs/read_text_file", {"path": "/live/a.txt", "line": 2, "limit": 1})["result"] == {
        "content": "two\n"
    }
    assert "error" in agent.ask(2, "fs/read_text_file", {"path": "/etc/passwd"})
    assert "error" in agent.ask(3, "fs/read_text_file", {"path": "/live/../etc/passwd"})
    agent.ask(4, "fs/write_text_file", {"path": "/live/new.txt", "content": "hi"})
    assert files["/live/new.txt"] == "hi"


def test_v2_turn_ends_at_idle_and_cancel_comes_after_the_recorded_updates() -> None:
    agent = Agent(RerunCore(script(v2=True, cancel_after=2), Options()))
    prompt = agent.setup()
    assert agent.say({"id": prompt["id"], "result": {"messageId": "u1"}}) == []  # acceptance: not the end
    idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    (nxt,) = agent.say({"method": "session/update", "params": {"sessionId": "live", "update": idle}})
    assert nxt["method"] == "session/prompt"
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "."}}
    assert agent.say({"method": "session/update", "params": {"sessionId": "live", "update": chunk}}) == []
    (cancel,) = agent.say({"method": "session/update", "params": {"sessionId": "live", "update": chunk}})
    assert cancel == {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "live"}}
    idle["stopReason"] = "cancelled"
    agent.say({"method": "session/update", "params": {"sessionId": "live", "update": idle}})
    assert agent.core.outcome == DONE and agent.core.completed == 2


def test_a_cancel_before_any_update_goes_by_the_recorded_delay_and_turns_time_out() -> None:
    core = RerunCore(script(cancel_after=0), Options(timeout=5.0))
    agent = Agent(core)
    prompt = agent.setup()
    agent.now = 1.0
    (nxt,) = agent.say({"id": prompt["id"], "result": {"stopReason": "end_turn"}})
    assert core.next_deadline() == 1.5  # the recorded cancel came 0.5 s after its prompt
    assert agent.take(core.poll(1.5))[0]["method"] == "session/cancel"
    assert core.next_deadline() == 6.0
    core.poll(6.0)
    assert core.outcome == TIMEOUT and core.message == "turn 2 did not end within 5s"


def test_hostile_agent_output_never_crashes_the_core() -> None:
    from pathlib import Path

    corpus = Path(__file__).resolve().parent / "corpus"
    for path in sorted(corpus.glob("*.bin")):
        core = RerunCore(script(v2="v2" in path.name), Options())
        agent = Agent(core)
        agent.setup()
        for line in path.read_bytes().split(b"\n"):
            frames = core.receive(line, 0.5)
            for f in frames:
                value = json.loads(f)
                assert isinstance(value, dict) or (value and all(isinstance(m, dict) for m in value)), path.name
        core.poll(10_000.0)
        assert core.outcome is not None, path.name


def test_recorded_authenticate_and_mode_changes_are_replayed_in_place() -> None:
    sid = "rec"
    msgs: list[tuple[str, float, dict]] = [
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}),
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"methodId": "key"}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 1, "result": {}}),
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": sid}}),
        (
            "c2a",
            1.0,
            {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
        ),
        ("a2c", 1.0, {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}),
        (
            "c2a",
            1.0,
            {"jsonrpc": "2.0", "id": 4, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "plan"}},
        ),
        ("a2c", 1.0, {"jsonrpc": "2.0", "id": 4, "result": {}}),
        (
            "c2a",
            2.0,
            {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
        ),
        ("a2c", 2.0, {"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "end_turn"}}),
    ]
    agent = Agent(RerunCore(build_script(msgs, sid), Options()))
    (auth,) = agent.say({"id": 0, "result": {"protocolVersion": 1}})
    assert auth["method"] == "authenticate" and auth["params"] == {"methodId": "key"}
    (new,) = agent.say({"id": auth["id"], "result": {}})
    assert new["method"] == "session/new"
    (p1,) = agent.say({"id": new["id"], "result": {"sessionId": "live"}})
    (mode,) = agent.say({"id": p1["id"], "result": {"stopReason": "end_turn"}})
    assert mode["method"] == "session/set_mode" and mode["params"] == {"sessionId": "live", "modeId": "plan"}
    (p2,) = agent.say({"id": mode["id"], "error": {"code": -32601, "message": "no modes"}})  # logged, not fatal
    assert p2["method"] == "session/prompt"
    agent.say({"id": p2["id"], "result": {"stopReason": "end_turn"}})
    assert agent.core.outcome == DONE and agent.core.completed == 2


def test_a_batch_of_agent_requests_is_answered_with_one_batch() -> None:
    agent = Agent(RerunCore(script(), Options()))
    agent.setup()
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "x/one", "params": {}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "live", "update": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "fs/read_text_file", "params": {"path": "/rec/a.txt"}},
    ]
    frames = agent.core.receive(json.dumps(batch).encode(), 0.0)
    (frame,) = frames
    replies = json.loads(frame)
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["error"]["code"] == -32601 and replies[1]["result"] == {"content": "recorded text"}


def test_the_summary_line_says_when_no_session_started() -> None:
    from acp_relay.rerun.shell import Result, summary

    dead = summary(Result("s@1", None, None, 2, 0, 4, "agent exited"))
    assert dead.endswith("; no session started") and "None" not in dead
    ok = summary(Result("s@1", "live-1", 3, 2, 2, 0, ""))
    assert ok.endswith("(connection 3); session live-1")


OPTS = [{"optionId": "allow", "kind": "allow_once"}, {"optionId": "deny", "kind": "reject_once"}]


def permission_script(asked: Sequence[tuple[str | None, str, str]]) -> Any:
    """One turn in which the agent asked these (kind, title, answered option id) permissions, in order."""
    sid = "rec"
    msgs: list[tuple[str, float, dict]] = [
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}),
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        (
            "c2a",
            1.0,
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
        ),
    ]
    for i, (kind, title, chosen) in enumerate(asked):
        call = {"toolCallId": f"t{i}", "title": title, **({"kind": kind} if kind else {})}
        params = {"sessionId": sid, "toolCall": call, "options": OPTS}
        msgs.append(
            ("a2c", 1.1, {"jsonrpc": "2.0", "id": 10 + i, "method": "session/request_permission", "params": params})
        )
        outcome = {"outcome": "selected", "optionId": chosen}
        msgs.append(("c2a", 1.2, {"jsonrpc": "2.0", "id": 10 + i, "result": {"outcome": outcome}}))
    msgs.append(("a2c", 2.0, {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}))
    return build_script(msgs, sid, 1)


def ask_permission(agent: Agent, rid: int, kind: str | None, title: str) -> str:
    call = {"toolCallId": f"live{rid}", "title": title, **({"kind": kind} if kind else {})}
    reply = agent.ask(rid, "session/request_permission", {"sessionId": "live", "toolCall": call, "options": OPTS})
    return str(reply["result"]["outcome"].get("optionId", reply["result"]["outcome"]["outcome"]))


def test_a_title_holding_a_path_or_time_still_finds_its_recorded_answer() -> None:
    """The recorded title names a temp path and a time; the live one differs only there: the recorded
    "allow" is found by kind and place (matching by title alone answered "deny")."""
    agent = Agent(
        RerunCore(permission_script([("edit", "Write /tmp/tmpa81x/out.txt at 18:01:02", "allow")]), Options())
    )
    agent.setup()
    assert ask_permission(agent, 40, "edit", "Write /tmp/tmpq07z/out.txt at 18:07:55") == "allow"
    assert [(p["rule"], p["answered_by"], p["answer"]) for p in agent.core.permissions] == [
        ("kind+place", "recording", "allow")
    ]


def test_each_kind_gets_its_own_answer_when_the_order_swaps() -> None:
    """Recorded: execute (allowed), then edit (denied), both titles stamped. Live: edit first, then execute,
    titles stamped anew: each kind gets its own recorded answer, by its place among requests of its kind."""
    recorded = [("execute", "Run `date` (1733248862)", "allow"), ("edit", "Edit /w/a (1733248863)", "deny")]
    agent = Agent(RerunCore(permission_script(recorded), Options(answer="allow")))
    agent.setup()
    assert ask_permission(agent, 40, "edit", "Edit /w/a (1733249999)") == "deny"
    assert ask_permission(agent, 41, "execute", "Run `date` (1733250000)") == "allow"
    assert [(p["n"], p["kind"], p["rule"]) for p in agent.core.permissions] == [
        (1, "edit", "kind+place"),
        (2, "execute", "kind+place"),
    ]


def test_a_request_past_what_was_recorded_gets_the_policy_and_the_report_says_none() -> None:
    """Requests without a kind count as a kind of their own; one past the recorded requests of its kind, whose
    title is used up or was never recorded, matches nothing: the --answer policy (default `recorded`: deny)
    answers, and the report says `none`."""
    recorded = [(None, "Fetch docs", "allow"), ("read", "Read a", "allow"), ("read", "Read b", "deny")]
    agent = Agent(RerunCore(permission_script(recorded), Options()))
    agent.setup()
    assert ask_permission(agent, 40, "read", "Read x") == "allow"  # the first read ("Read a")
    assert ask_permission(agent, 41, None, "Fetch docs, again") == "allow"  # the first without a kind
    assert ask_permission(agent, 42, "read", "Read y") == "deny"  # the second read ("Read b")
    assert ask_permission(agent, 43, "read", "Read a") == "deny"  # a third read, its title used up
    assert ask_permission(agent, 44, None, "Fetch other docs") == "deny"  # a second without a kind
    rules = [(p["n"], p["rule"], p["answered_by"]) for p in agent.core.permissions]
    assert rules == [
        (1, "kind+place", "recording"),
        (2, "kind+place", "recording"),
        (3, "kind+place", "recording"),
        (4, "none", "--answer deny"),
        (5, "none", "--answer deny"),
    ]


def test_a_kind_the_recording_never_asked_falls_back_to_the_title_then_allow() -> None:
    recorded = [("edit", "Apply patch", "allow")]
    agent = Agent(RerunCore(permission_script(recorded), Options(answer="allow")))
    agent.setup()
    assert ask_permission(agent, 40, "delete", "Apply patch") == "allow"  # kind changed, same title
    assert ask_permission(agent, 41, "edit", "Apply patch") == "allow"  # the edit's answer is used up: policy
    assert [(p["rule"], p["answered_by"]) for p in agent.core.permissions] == [
        ("title", "recording"),
        ("none", "--answer allow"),
    ]


def test_a_request_naming_only_its_tool_call_takes_kind_and_title_from_the_updates() -> None:
    """ACP lets a permission request carry only the tool call's id; its kind and title were in the tool_call
    update before it (the demo agent does this). Both sides are resolved so, and the report shows them."""
    sid = "rec"
    tool = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read /tmp/a1/notes", "kind": "read"}
    ask = {"sessionId": sid, "toolCall": {"toolCallId": "c1"}, "options": OPTS}
    msgs: list[tuple[str, float, dict]] = [
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}),
        ("c2a", 0.0, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
        ("a2c", 0.0, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": sid}}),
        (
            "c2a",
            1.0,
            {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
        ),
        ("a2c", 1.1, {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": tool}}),
        ("a2c", 1.1, {"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": ask}),
        ("c2a", 1.2, {"jsonrpc": "2.0", "id": 9, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}),
    ]
    script_ = build_script(msgs, sid, 1)
    assert [(p.kind, p.title) for p in script_.turns[0].permissions] == [("read", "Read /tmp/a1/notes")]
    agent = Agent(RerunCore(script_, Options()))
    agent.setup()
    live_tool = {**tool, "toolCallId": "k7", "title": "Read /tmp/b2/notes"}
    agent.say({"method": "session/update", "params": {"sessionId": "live", "update": live_tool}})
    reply = agent.ask(40, "session/request_permission", {**ask, "sessionId": "live", "toolCall": {"toolCallId": "k7"}})
    assert reply["result"]["outcome"] == {"outcome": "selected", "optionId": "allow"}
    (perm,) = agent.core.permissions
    assert (perm["kind"], perm["title"], perm["rule"]) == ("read", "Read /tmp/b2/notes", "kind+place")


def test_a_recorded_option_no_longer_offered_is_reported_with_its_rule_and_the_policy() -> None:
    agent = Agent(RerunCore(permission_script([("edit", "Edit", "allow")]), Options()))
    agent.setup()
    call = {"toolCallId": "x", "title": "Edit", "kind": "edit"}
    reject = [{"optionId": "r", "kind": "reject_always"}]
    reply = agent.ask(40, "session/request_permission", {"sessionId": "live", "toolCall": call, "options": reject})
    assert reply["result"]["outcome"] == {"outcome": "selected", "optionId": "r"}
    (perm,) = agent.core.permissions
    assert (perm["rule"], perm["answered_by"], perm["answer"]) == ("kind+place", "--answer deny", "r")


def test_the_report_redacts_a_secret_in_a_title(caplog: Any) -> None:
    """A title may hold a command line with a credential: the report (log and --json) keeps it out."""
    caplog.set_level("INFO", logger="acp_relay")
    agent = Agent(RerunCore(permission_script([("execute", "Run deploy", "allow")]), Options()))
    agent.setup()
    assert ask_permission(agent, 40, "execute", "Run deploy API_KEY=s3cr3t-v4lue") == "allow"
    (perm,) = agent.core.permissions
    assert "s3cr3t" not in perm["title"] and perm["title"].startswith("Run deploy API_KEY=")
    assert "permission 1 (execute)" in caplog.text and "s3cr3t" not in caplog.text
