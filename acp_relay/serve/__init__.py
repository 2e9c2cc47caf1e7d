"""`acp-relay serve`: a stdio agent served over WebSocket and Streamable HTTP. cli.py is its click
declaration; the listener, shared with `proxy`, is
record/listener.py."""
