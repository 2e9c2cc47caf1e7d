"""`acp-relay setup`: wrap an agent in an editor's config in one command, and undo it in one."""

from .command import Request, SetupError, relay_executable, run_setup

__all__ = ["Request", "SetupError", "relay_executable", "run_setup"]
