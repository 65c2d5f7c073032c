"""What the UI shows with each materialisation, one module per feature over ``base``."""
