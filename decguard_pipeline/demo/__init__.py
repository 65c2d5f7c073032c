"""Bundled demo services for examples: deterministic, loopback-only, no network."""
