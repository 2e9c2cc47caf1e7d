"""jsonrpc.Correlator: the one rule that pairs answers with requests (per direction, ids kept apart by type)."""

from __future__ import annotations

from acp_relay.protocol.jsonrpc import A2C, C2A, Correlator


def test_an_answer_takes_the_request_of_the_other_direction() -> None:
    c: Correlator[str] = Correlator()
    c.request(C2A, 1, "editor's")
    c.request(A2C, 1, "agent's")  # both sides number from 0: the same id, two requests
    assert c.answer(A2C, 1) == "editor's"  # the agent answers the editor's request
    assert c.answer(A2C, 1) is None  # taken once
    assert c.answer(C2A, 1) == "agent's"
    assert c.pending == {}


def test_ids_of_different_types_stay_apart() -> None:
    c: Correlator[str] = Correlator()
    c.request(C2A, 1, "int")
    c.request(C2A, "1", "str")
    c.request(C2A, True, "bool")
    assert c.answer(A2C, "1") == "str"
    assert c.answer(A2C, 1.0) is None
    assert c.answer(A2C, True) == "bool"
    assert c.answer(A2C, 1) == "int"


def test_cancelled_looks_without_taking() -> None:
    c: Correlator[str] = Correlator()
    assert c.cancelled(C2A, 7) is None
    c.request(C2A, 7, "prompt")
    assert c.cancelled(C2A, 7) == "prompt"  # a $/cancel_request travels the requester's way
    assert c.cancelled(A2C, 7) is None  # the other side's id 7 is another request
    assert c.answer(A2C, 7) == "prompt"
    assert c.cancelled(C2A, 7) is None


def test_keys_name_the_request_for_both_its_sender_and_its_answer() -> None:
    c: Correlator[str] = Correlator()
    c.request(A2C, {"odd": [1]}, "object id")  # not a valid id, but peers send them
    key = Correlator.key(A2C, {"odd": [1]})
    assert list(c.pending) == [key]  # the keys views keep beside the map are the map's own
    c.request(C2A, 1, "int")
    c.request(C2A, "1", "str")
    assert c.pending[Correlator.key(C2A, "1")] == "str" and c.pending[Correlator.answer_key(A2C, 1)] == "int"
    assert Correlator.answer_key(C2A, {"odd": [1]}) == key
    assert Correlator.answer_key("err", 1) != Correlator.key(C2A, 1)  # no stream answers but the other side
    assert c.answer(C2A, {"odd": [1]}) == "object id"
