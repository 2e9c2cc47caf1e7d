"""The entry point. `acp-relay run` sits on the editor's start-up path, so it is parsed here without
loading click, from the table of run's options (run/options.py) that click's declaration is built from
too; everything else (and anything unusual about a `run`) goes through the click CLI in cli.py."""

from __future__ import annotations

import sys

from .store.db import resolve_db_path


def _fast_run(args: list[str]) -> int | None:
    """`acp-relay run` without loading click: it sits on the editor's start-up path. Anything unusual
    (--help, a bad option) returns None and goes through click, which says it properly."""
    from .run.options import parse_fast

    parsed = parse_fast(args)
    if parsed is None:
        return None
    opts, command = parsed
    from .protocol.redact import Policy
    from .run.relay import run as run_relay

    try:
        policy = Policy.from_options(tuple(opts["redact"]), bool(opts["no_redact"]))  # type: ignore[arg-type]
    except Exception:
        return None
    from . import diagnostics

    diagnostics.set_command("run")  # the process is `run` for its whole life: every line it says names it
    diagnostics.install()
    return run_relay(command, resolve_db_path(opts["db"]), label=opts["label"], policy=policy, otlp=opts["otlp"])  # type: ignore[arg-type]


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        status = _fast_run(sys.argv[2:])
        if status is not None:
            sys.exit(status)
    from .cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
