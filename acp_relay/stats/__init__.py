"""`acp-relay stats`: counts, latencies and turn durations. command.py holds compute_stats (the data) and
render_stats, cli.py the click declaration."""
