"""`acp-relay prune`: whole connections deleted by age and size. command.py is the Python API, cli.py the
click declaration."""
