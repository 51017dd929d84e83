"""Flight-recorder analyzers: faultloop's own (`analysis`) and the peers run beside it (`peers`)."""
