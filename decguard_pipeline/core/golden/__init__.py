"""Golden-set evaluation: DecGuard's metrics and their statistics over one run's results."""
