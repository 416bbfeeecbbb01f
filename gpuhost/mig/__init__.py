"""gpuhost.mig: see docs/architecture.md, "The house in one table"."""
