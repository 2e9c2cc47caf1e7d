"""`acp-relay info`: what a session's peers said about themselves. command.py is the Python API (`compute`
the data, `render`/`render_json` the output), cli.py the click declaration."""
