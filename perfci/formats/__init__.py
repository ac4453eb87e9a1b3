"""Profile parsers, pure (no database, no HTTP): one module per format, grouped by family.

``nsys/`` (Nsight Systems text, CSV and SQLite exports), ``nvprof/``, ``pytorch/`` (profiler
tables and Kineto Chrome traces), ``workload/`` (layer workload tables, AICB files, Megatron-LM
rank traces) and ``native/`` (perfci's own JSON document). ``registry`` lists the formats
(each family's ``_detectors`` and the path of its reader), ``protocol.FormatParser`` is what
each reader satisfies, and the top-level private modules
(``_textio``, ``_text_lines``, ``_fixed_width``, ``_steps``) are helpers shared by families.
"""
