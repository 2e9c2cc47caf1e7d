"""`acp-relay stats`: counts, latencies and turn durations. command.py is the Python API (`compute` the data,
`render`/`render_json` the output), cli.py the click declaration."""
