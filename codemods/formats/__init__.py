"""Machine-readable report formats for `devmod apply --format ...` (one module per format)."""
