"""`acp-relay search`: full-text search of what people read. command.py is the Python API (`compute` the
hits, `render`/`render_json` the output), cli.py the click declaration."""
