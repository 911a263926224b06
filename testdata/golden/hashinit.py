"""Deterministic pseudo-random numbers shared with the Go tests
(internal/golden.HashUniform): element i of hash_uniform(seed, n) is
splitmix64(seed + (i+1)*0x9E3779B97F4A7C15), top 53 bits scaled to [0, 1),
mapped to [-1, 1). Large models' weights and inputs are drawn this way so that
the tests rebuild them instead of reading them from committed files."""
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def hash_uniform(seed, n):
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0 / 2**53) - 1.0


def sample_indices(n, k):
    k = min(n, k)
    return [j * n // k for j in range(k)]
