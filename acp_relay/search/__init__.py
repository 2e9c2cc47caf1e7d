"""`acp-relay search`: full-text search of what people read. command.py is the Python API, cli.py the
click declaration."""
