"""gates.judges: one module per gate family, each the whole gate (what, why, thresholds, the verdict recomputed from raw data, its picture); catalogue.py lists them."""
