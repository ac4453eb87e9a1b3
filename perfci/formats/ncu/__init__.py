"""Nsight Compute (ncu) command-line output."""
