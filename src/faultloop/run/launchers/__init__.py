"""The launchers a cell's job runs under: one module per launcher, one row each in `LAUNCHERS`."""
