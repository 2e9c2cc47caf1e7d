"""`acp-relay diff`: two recorded sessions compared layer by layer. command.py is the Python API, cli.py the
click declaration."""
