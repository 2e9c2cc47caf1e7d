"""The command line: a registry of the commands, each loaded only when asked for. Each command's folder
holds its click declaration (COMMAND/cli.py), a thin layer over that folder's Python API; a new command is
its folder and one line here."""

from __future__ import annotations

import click

from . import __version__
from .cli_support import Tool

# name -> ("module:attribute" of its click declaration, its summary in `acp-relay --help`: one whole sentence).
# The summaries are here so that --help and completion need not import every command.
# (`import_`: `import` is a Python keyword)
COMMANDS = {
    "check": ("acp_relay.check.cli:check", "Judge recorded traffic against JSON-RPC, the ACP schemas and rules."),
    "delete": ("acp_relay.delete.cli:delete", "Remove one recorded session's frames."),
    "demo": ("acp_relay.demo.cli:demo", "Run a scripted agent and client through the relay."),
    "diff": ("acp_relay.diff.cli:diff", "Compare two recorded sessions, layer by layer."),
    "doctor": ("acp_relay.doctor.cli:doctor", "Check what the editors' configs start."),
    "export": ("acp_relay.export.cli:export_cmd", "Write a session or a connection to a file to share."),
    "import": ("acp_relay.import_.cli:import_cmd", "Bring captures in as imported connections."),
    "info": ("acp_relay.info.cli:info", "Show what a session's peers said about themselves."),
    "otel": ("acp_relay.otel.cli:otel", "Send recorded sessions as OpenTelemetry traces."),
    "proxy": ("acp_relay.proxy.cli:proxy", "Record the connections carried on to a remote agent."),
    "prune": ("acp_relay.prune.cli:prune", "Delete whole connections, oldest first, then reclaim the space."),
    "recover": ("acp_relay.recover.cli:recover", "Store what relays that died left in their spill journals."),
    "replay": ("acp_relay.replay.cli:replay", "Stand in for an agent: serve a recorded session."),
    "rerun": ("acp_relay.rerun.cli:rerun", "Stand in for the editor: play a session to a live agent."),
    "run": ("acp_relay.run.cli:run", "Start an agent and relay its stdio, recording every frame."),
    "search": ("acp_relay.search.cli:search", "Search what people read in every recorded session."),
    "serve": ("acp_relay.serve.cli:serve", "Serve a stdio agent over WebSocket and HTTP, recorded."),
    "setup": ("acp_relay.setup.cli:setup", "Write an agent into an editor's config, recorded."),
    "show": ("acp_relay.show.cli:show", "Inspect the recorded sessions and their frames."),
    "stats": ("acp_relay.stats.cli:stats", "Count frames, latencies, turn durations and bytes."),
    "view": ("acp_relay.view.cli:view", "Write a session as one HTML page and open it."),
}


@click.group(cls=Tool, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="acp-relay")
def cli() -> None:
    """Record, inspect and replay Agent Client Protocol traffic.

    \b
    Every command that reads a session takes it the same way: SESSION is an id, a unique prefix of one,
    `last`, or ID@N (the session in connection N; `last@N` is the newest there), and -c/--connection N|last
    names a whole connection. Exit status: 0 success, 1 the answer a script tests for (check findings, diff
    differences, search no match), 2 usage error / no database / no such or an ambiguous session, 3 a
    timeout, 4 the peer died, 5 the database is unusable, 128+N a signal; `run` exits with the agent's status.
    """


def main() -> None:
    cli(prog_name="acp-relay")
