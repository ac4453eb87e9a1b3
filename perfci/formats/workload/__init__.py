"""Training workloads: layer tables (ASTRA-sim, SimAI/AICB, TSV), AICB files, Megatron traces."""
