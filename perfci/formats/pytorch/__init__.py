"""PyTorch profiler: ``key_averages().table()`` text and Kineto Chrome-trace JSON."""
