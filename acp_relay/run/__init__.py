"""`acp-relay run`: its options (options.py, read by the click-free start-up path too) and its click
declaration (cli.py). The relay itself, the shell, is record/relay.py and record/remote.py for now."""
