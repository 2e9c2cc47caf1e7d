"""`acp-relay demo`: scripted peers through the relay. command.py holds the peers and the run, cli.py the
click declaration."""
