"""How consistent a model is when asked the same case several times (``pipeline.repeats``):
the measures (``measures.py``) and the sidecar section built from the repetitions' results
(``section.py``). Pure: no network, no warehouse."""
