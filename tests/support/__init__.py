"""What the tests share: one CLI runner (support.cli) and the fixture databases (support.databases)."""
