"""`acp-relay check`: judge recorded traffic against JSON-RPC 2.0, the ACP schemas and the Prompt Lifecycle.
command.py is the Python API (`compute` the findings, `render`/`render_json` the output), cli.py the click
declaration."""
