"""The attribution tools: the analyzer registry and kinds, logsage, the flight-recorder analyzers,
the baselines, the LLM client."""
