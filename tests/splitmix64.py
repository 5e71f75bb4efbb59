"""The documented CPU dropout mask in plain Python, to test both of its implementations
(transformer_lib.dropout.keep_mask and the compiled kernel) against."""

import torch

MASK64 = 2**64 - 1


def splitmix64(key: int, w: int) -> int:
    """The w-th output (from 0) of SplitMix64 started at key, as an unsigned 64-bit int."""
    z = (key + (w + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def splitmix64_mask(key: int, n: int, p: float) -> torch.Tensor:
    """Which of n elements are kept: element i takes the (i mod 4)-th 16 bits of output
    i // 4 and is kept when they, read as a signed integer, are >= round(p * 2^16) - 2^15."""
    keep = []
    for i in range(n):
        bits = (splitmix64(key & MASK64, i // 4) >> (16 * (i % 4))) & 0xFFFF
        signed = bits - 2**16 if bits >= 2**15 else bits
        keep.append(signed >= round(p * 2**16) - 2**15)
    return torch.tensor(keep)
