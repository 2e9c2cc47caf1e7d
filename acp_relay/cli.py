"""The command line: a registry of the commands, each loaded only when asked for. Each command's folder
holds its click declaration (COMMAND/cli.py), a thin layer over that folder's Python API; a new command is
its folder and one line here."""

from __future__ import annotations

import click

from . import __version__
from .cli_support import Tool

# name -> "module:attribute" of its click declaration (`import_`: `import` is a Python keyword)
COMMANDS = {
    "check": "acp_relay.check.cli:check",
    "delete": "acp_relay.delete.cli:delete",
    "demo": "acp_relay.demo.cli:demo",
    "diff": "acp_relay.diff.cli:diff",
    "doctor": "acp_relay.doctor.cli:doctor",
    "export": "acp_relay.export.cli:export_cmd",
    "import": "acp_relay.import_.cli:import_cmd",
    "info": "acp_relay.info.cli:info",
    "otel": "acp_relay.otel.cli:otel",
    "proxy": "acp_relay.proxy.cli:proxy",
    "prune": "acp_relay.prune.cli:prune",
    "recover": "acp_relay.recover.cli:recover",
    "replay": "acp_relay.replay.cli:replay",
    "rerun": "acp_relay.rerun.cli:rerun",
    "run": "acp_relay.run.cli:run",
    "search": "acp_relay.search.cli:search",
    "serve": "acp_relay.serve.cli:serve",
    "setup": "acp_relay.setup.cli:setup",
    "show": "acp_relay.show.cli:show",
    "stats": "acp_relay.stats.cli:stats",
    "view": "acp_relay.view.cli:view",
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
