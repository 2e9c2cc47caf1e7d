"""`acp-relay rerun`: play a recorded session's editor side against a live agent, recorded as a new run.

- script.py: the editor's side of the recorded session (prompts, cancels, answers to agent requests); pure.
- core.py: sans-I/O. Agent lines in with the time, frames out, a wake-up deadline: negotiation, one prompt
  per ended turn, cancels at their recorded point, answers to permissions, files and terminals.
- shell.py: starts the agent under `acp-relay run` (so the run is recorded like any other), pumps lines,
  closes and waits, and finds the new connection.
"""

from .core import Options, RerunCore
from .script import EditorScript, RerunError, build_script
from .shell import Result, print_result, run_rerun

__all__ = ["EditorScript", "Options", "RerunCore", "RerunError", "Result", "build_script", "print_result", "run_rerun"]
