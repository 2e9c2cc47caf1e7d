"""`acp-relay doctor`: check what each editor config starts the way the editor will start it.

An editor launched from a desktop menu gets a short PATH and no shell profile, so a bare `acp-relay` or agent
name that works in a terminal may not start there. Doctor resolves each wrapped entry with that PATH, runs the
relay it names, and checks the database the entry records into: one line per check, ok / warn / FAIL.
"""

from ..protocol.editors import FILE_EDITORS
from .checks import Check, diagnose, run_doctor

EDITORS = [e.key for e in FILE_EDITORS]  # the editors whose config doctor reads (the others' is code)

__all__ = ["EDITORS", "Check", "diagnose", "run_doctor"]
