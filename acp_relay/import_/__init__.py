"""`acp-relay import`: captures brought in as connections. The folder is `import_` because `import` is a
Python keyword (PEP 8: a trailing underscore), so `acp_relay.import_` is the one name that still says which
command it is. command.py is the Python API, cli.py the click declaration."""
