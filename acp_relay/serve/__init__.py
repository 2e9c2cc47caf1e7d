"""`acp-relay serve`: a stdio agent served over WebSocket and Streamable HTTP. cli.py is its click
declaration; the shell is record/serve.py for now."""
