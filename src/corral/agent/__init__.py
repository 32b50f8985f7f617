"""The agent on every GPU server: GPU discovery, task launch, logs, heartbeats."""
