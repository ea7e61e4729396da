"""Measurement machinery for the benchmarks, the oracle and the tests: interleaved timing
with an A/A floor (`timing`), the decision-set oracle, the compiled census comparison,
the CUDA compile check and poisoned inputs. Nothing a user's build runs imports it
(`integration` never does; tests/test_layers.py checks)."""
