"""The display layer: headless and torch-free. Units, tables and result rows for the CLI, the
exports, `memlab dev cite` and the app's tables — one policy, one place.

    units     bytes -> "12.24 GB" (one GB/GiB policy), deltas, percentages; "16GiB" -> bytes
"""
