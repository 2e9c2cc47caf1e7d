"""`acp-relay export`, `import` and `info`: take a session out of a database, bring a capture in, describe one."""
