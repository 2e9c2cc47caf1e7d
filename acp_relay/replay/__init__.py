"""`acp-relay replay`: serve a recorded session to a live client, as a stand-in agent.

The editor starts `acp-relay replay SESSION` in place of an agent; replay reads the database only.
- recording.py: one session's recorded messages, folded by the materializer (history replay) and cut into
  turns of ready-to-send steps (turn replay); pure, apart from `load_recording`.
- core.py: sans-I/O. Lines from the client go in with the current time; frames to write come out, plus the
  time it next wants to be woken. It decides everything: negotiation, answers, which recorded frame goes
  next and when, waiting for the client's answers to agent requests, cancel.
- answers.py: what initialize and the session methods answer, and the history a load replays; pure.
- playback.py: what is playing (client sessions, their turns, batch replies) and the rewrite of a recorded
  message into the bytes sent for it.
- shell.py: a thread reads stdin into a queue; the main thread feeds the core and writes its frames.

Recorded frames are re-sent byte for byte, except the values replay must change (the sessionId, request
ids, v1 terminal ids), which are spliced into the exact bytes (protocol/jsonspan.py).
"""

from .core import ReplayCore
from .recording import RecordedTurn, Recording, ReplayError, build_recording, load_recording
from .shell import parse_speed, run_replay, serve

__all__ = [
    "RecordedTurn",
    "Recording",
    "ReplayCore",
    "ReplayError",
    "build_recording",
    "load_recording",
    "parse_speed",
    "run_replay",
    "serve",
]
