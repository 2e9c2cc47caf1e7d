"""`acp-relay view`: a session as one HTML page. command.py is the Python API (`compute` the page's data,
`render`/`save` the page), data.py what the page embeds, cli.py the click declaration."""
