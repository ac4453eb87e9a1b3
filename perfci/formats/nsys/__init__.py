"""Nsight Systems: ``nsys stats`` console text and CSV, and ``nsys export --type sqlite``."""
