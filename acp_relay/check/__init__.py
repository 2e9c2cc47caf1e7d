"""`acp-relay check`: judge recorded traffic against JSON-RPC 2.0, the ACP schemas and the Prompt Lifecycle."""
