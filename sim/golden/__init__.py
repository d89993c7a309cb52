"""Bit-exact NumPy models of the RTL's arithmetic."""

from .fp4 import E2M1_VALUES, fp4_mul

__all__ = ["E2M1_VALUES", "fp4_mul"]
