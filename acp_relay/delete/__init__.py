"""`acp-relay delete`: one session's frames removed, never a session still being recorded. command.py is
the Python API, cli.py the click declaration."""
