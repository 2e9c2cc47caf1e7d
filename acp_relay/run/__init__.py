"""`acp-relay run`: its options (options.py, read by the click-free start-up path too) and its click
declaration (cli.py). The stdio relay is relay.py,
`--connect`'s remote link connect.py, and shell.py the trio shell both run in."""
