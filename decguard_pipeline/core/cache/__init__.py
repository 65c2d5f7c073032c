"""The response cache, pure parts: what identifies an answer (``key``), answers as columns
(``answers``) and what a run saved (``summary``). Storage is the warehouse's
(``warehouse/responses.py``); the runner replays and records (``backends/cache.py``).
docs/cache.md describes the whole."""
