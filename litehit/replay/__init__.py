"""The offline replay: trace -> lanes -> facts CSV, published atomically."""
