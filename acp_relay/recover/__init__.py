"""`acp-relay recover`: store what the spill journals of dead relays kept. cli.py is its click declaration;
the recovery is record/recover.py's (the next `run` does the same)."""
