"""`acp-relay export`: a session or a connection written to a file to share. command.py is the Python
API, cli.py the click declaration."""
