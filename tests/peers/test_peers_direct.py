"""End-to-end check of the SDK peers talking to each other directly (no relay in between).

This proves `sdk_client.py` and `sdk_agent.py` work, so relay tests can later insert the relay
between them (``sdk_client.py --file F -- <relay cmd> -- python sdk_agent.py``) and expect the same JSON.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from peers.refusing_remote import _read_frame, _text_frame
from peers.scenario import NOTES, SDK_AGENT, assert_scenario, run_client
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side


def test_sdk_client_against_sdk_agent_directly(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES, encoding="utf-8")
    result = run_client([sys.executable, str(SDK_AGENT)], notes, cwd=tmp_path)
    assert_scenario(result, NOTES)
    assert result["load_updates"][0]["content"]["text"] == f"hello {notes}"


@pytest.mark.parametrize("size", [5, 125, 126, 65535, 65536])
def test_the_refusing_remotes_websocket_frames_read_back_whole(size: int) -> None:
    """tests/peers/refusing_remote.py writes its WebSocket frames by hand: each length form (1, 2 and 8
    bytes) reads back through our client's frame layer (websockets') as the message it holds."""
    payload = b"x" * size
    client = Protocol(Side.CLIENT)
    client.receive_data(_text_frame(payload))
    frames = [(f.opcode, f.data, f.fin) for f in client.events_received() if isinstance(f, Frame)]
    assert frames == [(Opcode.TEXT, payload, True)]
    assert client.parser_exc is None


@pytest.mark.parametrize(
    ("size", "length"), [(5, b"\x85"), (126, b"\xfe\x00\x7e"), (65536, b"\xff" + (65536).to_bytes(8, "big"))]
)
def test_the_refusing_remote_reads_each_length_form_of_a_masked_frame(size: int, length: bytes) -> None:
    """A client's masked frame, with its length in 1, 2 and 8 bytes, read whole (all of it in hand: the
    socket is never read)."""
    payload, mask = b"y" * size, b"\x01\x02\x03\x04"
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    with socket.socket() as unused:
        assert _read_frame(unused, b"\x81" + length + mask + masked + b"rest") == (payload, b"rest")
