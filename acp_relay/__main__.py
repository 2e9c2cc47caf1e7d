"""The entry point. `acp-relay run` sits on the editor's start-up path, so it is parsed here without
loading click; everything else (and anything unusual about a `run`) goes through the click CLI in cli.py."""

from __future__ import annotations

import sys

from .store.db import resolve_db_path


def _fast_run(args: list[str]) -> int | None:
    """`acp-relay run` without loading click: it sits on the editor's start-up path. Anything unusual
    (--help, a bad option) returns None and goes through click, which says it properly."""
    opts: dict[str, object] = {"db": None, "label": None, "redact": [], "no_redact": False, "otlp": None}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = args[i + 1 :]
            break
        name, eq, value = arg.partition("=")
        if name in ("--db", "--label", "--redact", "--otlp"):
            if not eq:
                if i + 1 >= len(args):
                    return None
                i, value = i + 1, args[i + 1]
            if name == "--redact":
                opts["redact"].append(value)  # type: ignore[attr-defined]
            else:
                opts[name[2:]] = value
        elif arg == "--no-redact":
            opts["no_redact"] = True
        else:
            return None  # a command without `--`, --help, or an unknown option: click's job
        i += 1
    else:
        return None
    if not command:
        return None
    from .protocol.redact import Policy
    from .record.relay import run as run_relay

    try:
        policy = Policy.from_options(tuple(opts["redact"]), bool(opts["no_redact"]))  # type: ignore[arg-type]
    except Exception:
        return None
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
