"""The evaluation site's data and build: queries on the warehouse's views (``queries``), two
versions compared (``compare``), LLM requests rebuilt (``transcripts``), every page written
(``build``). Rendering lives in ``core/site``."""
