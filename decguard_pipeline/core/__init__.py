"""The domain: contracts, datasets, decisions, metrics, gates, reports. No Dagster, no network."""
