"""nvprof (CUDA <= 11 profiler): summary text and ``--csv`` output, ``--csv`` traces included."""
