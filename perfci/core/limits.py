"""What one upload to the service may hold: the defaults of the settings, of
``perfci.server.deps.Limits`` and of ``perfci serve --help``.

A module of its own, importing nothing, so that ``perfci --help`` can print them without
loading the settings machinery (pydantic-settings) that the CLI's cold start leaves out.
"""

#: Largest request body, in bytes.
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Most metrics in one uploaded run, all repeats together.
MAX_METRICS = 200_000
#: Most per-step samples in one uploaded run.
MAX_SAMPLES = 2_000_000
#: Largest size the ``.gz`` files of one upload may inflate to, in bytes.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
#: Largest inflation ratio of a ``.gz`` file.
MAX_INFLATION_RATIO = 200
#: CPU seconds the parse of one upload may take, plus this per MiB of input (issue 31).
PARSE_CPU_SECONDS = 1.5
PARSE_CPU_SECONDS_PER_MIB = 0.5
#: Memory (address space) the parse of one upload may take, in bytes.
PARSE_MEMORY_BYTES = 1024 * 1024 * 1024
#: Uploads per minute one token may send to one server process, and its burst.
UPLOAD_RATE = 120.0
UPLOAD_BURST = 60
#: Largest magnitude of a time (ns), size (bytes) or count perfci reads or stores: 1e18 ns is
#: 31 years. Anything larger is a unit mistake or a hostile file, and sums of such numbers
#: overflow a float (a Google Benchmark ``real_time`` of 1e308 did, issue 31).
MAX_VALUE = 1e18
