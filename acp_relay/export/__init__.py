"""`acp-relay export`: a session or a connection written to a file to share. command.py is the Python API
(`compute` writes the file or makes the document, `render` prints a document), cli.py the click declaration."""
