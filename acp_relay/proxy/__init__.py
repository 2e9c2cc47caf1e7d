"""`acp-relay proxy`: listen and carry each connection on to a remote agent, recording both sides. cli.py
is its click declaration; the listener, shared with `serve`, is
record/listener.py."""
