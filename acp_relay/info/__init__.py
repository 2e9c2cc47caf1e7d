"""`acp-relay info`: what a session's peers said about themselves. command.py is the Python API, cli.py the
click declaration."""
