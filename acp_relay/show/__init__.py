"""`acp-relay show`: recorded sessions and their frames. command.py is the Python API (`compute` reads one of
four shapes, `render` prints it), cli.py the click declaration."""
