"""acp-relay: record, inspect and replay Agent Client Protocol traffic between an editor and an agent."""

__version__ = "0.1.0"
