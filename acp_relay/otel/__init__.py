"""`acp-relay otel`: recorded sessions as OpenTelemetry traces (see command.py; the SDK layer is sdk.py)."""
