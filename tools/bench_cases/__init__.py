"""The benchmark's cases, one module each; tools/bench.py runs them and prints the table."""
