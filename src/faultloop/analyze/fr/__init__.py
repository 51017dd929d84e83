"""Flight-recorder dumps and faultloop's own analysis of them (`dumps`, `analysis`); the FR
kinds are in `analyze/kinds/`."""
