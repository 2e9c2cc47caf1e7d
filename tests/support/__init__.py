"""What the tests share: one CLI runner (support.cli), the fixture databases (support.databases), and a
fake HOME with editor configs for setup and doctor (support.editors)."""
