"""DecGuard 0.1 reports: build, write, load-and-verify, render."""
