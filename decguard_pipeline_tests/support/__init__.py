"""Helpers shared by test modules (not tests themselves)."""
