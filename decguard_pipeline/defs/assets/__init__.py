"""The assets (and their checks) of each feature: decorators and thin bodies over ``steps``."""
