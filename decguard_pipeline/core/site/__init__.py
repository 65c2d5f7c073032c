"""The evaluation site: static pages generated from the warehouse (``decguard-pipeline site
build DIR``, served by ``decguard-pipeline ui``). This package renders; it reads nothing. The
pages' data comes from ``steps/site`` (the warehouse's views), the URL scheme from
:mod:`.paths` (also what the Dagster assets link to), the markup from Jinja2 templates with
autoescaping (``templates/``), the pictures from :mod:`.charts` (inline SVG). See docs/ui.md.
"""
