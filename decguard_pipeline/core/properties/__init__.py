"""Metamorphic properties (DecGuard §9): pure transformations, comparison, judging, summaries."""
