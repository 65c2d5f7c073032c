"""Core objects -> warehouse rows, one module per feature (the schemas are in ``schema/``)."""
