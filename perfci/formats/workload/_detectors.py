"""The workload and training-log formats' names and sniffs, without their readers (see
``formats.protocol``)."""

from __future__ import annotations

from perfci.core.compat import compile_linear
from perfci.formats.protocol import Head, detector

# --- deepspeed_comms
_DEEPSPEED_NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
_DEEPSPEED_SNIFF_OP = compile_linear(
    r"comm op: (?:(?!comm op: )[^|\n])+(?: \| comm group: [^|\n]+)?"
    r"(?: \| \[Caller Func: [^\]|\n]*\])?"
    rf" \| time \(ms\): {_DEEPSPEED_NUMBER} \| msg size: "
)
_DEEPSPEED_SNIFF_SUMMARY = compile_linear(
    r"(?m)^Comm\. Op +Message Size +Count +Total Latency\(ms\)"
)

# --- megatron_log
_ITERATION_HEAD = r"(?<![\w-])iteration\s+\d+\s*/\s*\d+\s*\|"
# The elapsed time is looked for up to the next iteration head only, where a new attempt
# starts anyway: reading on to the end of the line from every head of a line of them was
# quadratic (issue 31: 'iteration 1/1 |' * 4369 took 21 s).
_MEGATRON_LOG_SNIFF_ITERATION = compile_linear(
    rf"{_ITERATION_HEAD}(?:(?!{_ITERATION_HEAD})[^\n])*?elapsed time per iteration \((?:ms|s)\):"
)
# A long preamble (the arguments alone are tens of KB, NCCL_DEBUG output far more) can push the
# first iteration line past the sniffed head: Megatron's own banners mark the log as well.
_MEGATRON_LOG_SNIFF_SETUP = compile_linear(
    r"-{24} arguments -{24}|using world size: \d+, data-parallel size: \d+"
)

# --- megatron_trace, nccl_tests, simai_results
_MEGATRON_TRACE_SNIFF = compile_linear(r"(?m)^rank:\d+:[A-Za-z_]\w*\([A-Za-z_]\w*=")
_NCCL_TESTS_SNIFF = compile_linear(
    r"#\s+size\s+count\s+type\s+(?:\S+\s+){0,2}(?:cpu)?time\s+algbw\s+busbw\s"
    r"|# nThread \d+ nGpus \d+ minBytes \d+ maxBytes \d+"
)
_SIMAI_RESULTS_SNIFF = compile_linear(
    r"\A\ufeff?\s*(?:layer_name,[^,\r\n]*,fwd compute,wg compute,ig compute,fwd exposed comm,"
    r"|File name, ?Expose DP comm,)"
)

# --- workload_table: the first lines of each dialect (its readers use them too)
RANK_RANGE = compile_linear(r"^\[rank\s*([0-9]{1,9})\s*~\s*rank\s*([0-9]{1,9})\]$")
CSV_HEADER = compile_linear(r"^comm_type,comm_group,")
AIOB_FIRST = compile_linear(r"^train_iter:\s*([0-9]{1,9})\s*$")
PARALLELISM = compile_linear(r"^(DATA|MODEL|MICRO|HYBRID_[A-Z_]+)$")
_COMPUTE_COLUMN = compile_linear(r"(^|\t)\w*compute_time(\t|$)")
_LAYER_COUNT = compile_linear(r"[0-9]+(\s|$)")
SNIFF_LINES = 6  # the dialect is told from the first lines


def _deepspeed_comms(head: Head) -> bool:
    """A per-operation line or the summary's header."""
    return bool(_DEEPSPEED_SNIFF_OP.search(head.text) or _DEEPSPEED_SNIFF_SUMMARY.search(head.text))


def _megatron_log(head: Head) -> bool:
    """An iteration line with its elapsed time, or Megatron's ``arguments`` / world-size banner."""
    text = head.text
    return bool(
        _MEGATRON_LOG_SNIFF_ITERATION.search(text) or _MEGATRON_LOG_SNIFF_SETUP.search(text)
    )


def _megatron_trace(head: Head) -> bool:
    """A line starting ``rank:N:op(key=`` near the top of the file."""
    return _MEGATRON_TRACE_SNIFF.search(head.text[:65536]) is not None


def _nccl_tests(head: Head) -> bool:
    """The results' column header, or the settings line every test prints first."""
    return bool(_NCCL_TESTS_SNIFF.search(head.text))


def _simai_results(head: Head) -> bool:
    """The results header (``layer_name,<run>,fwd compute,...``) or the summary's keys, first."""
    return _SIMAI_RESULTS_SNIFF.match(head.text) is not None


def _workload_table(head: Head) -> bool:
    """One of the dialects' first lines: a parallelism keyword, a TSV or CSV header, ..."""
    return family(head.text) is not None


def family(text: str) -> str | None:
    """``tsv``, ``layers`` (ASTRA-sim or SimAI), ``aicb_csv``, ``aiob``, or ``None``."""
    lines = [
        stripped
        for line in text.splitlines()[:SNIFF_LINES]
        if (stripped := line.strip("\ufeff \r")) and not stripped.isspace()
    ]
    if not lines:
        return None
    first, second = lines[0], lines[1] if len(lines) > 1 else ""
    tokens = first.split()
    if tokens[0] in ("name", "layer", "layer_name") and _COMPUTE_COLUMN.search(first):
        return "tsv"
    if CSV_HEADER.match(first) or (RANK_RANGE.match(first) and CSV_HEADER.match(second)):
        return "aicb_csv"
    if AIOB_FIRST.match(first):
        return "aiob"
    if PARALLELISM.match(tokens[0]) and _LAYER_COUNT.match(second):
        return "layers"
    return None


DEEPSPEED_COMMS = detector(
    _deepspeed_comms, "DeepSpeed comms_logger output: per-collective lines and log_summary() tables"
)
MEGATRON_LOG = detector(
    _megatron_log,
    "Megatron-LM training log (pretrain_gpt.py stdout): iteration time, throughput, timers, memory",
)
MEGATRON_TRACE = detector(
    _megatron_trace, "Megatron-LM / AICB rank trace log (rank:N:op(key=value,...), Echo CMD traces)"
)
NCCL_TESTS = detector(
    _nccl_tests, "NVIDIA nccl-tests logs (all_reduce_perf …): time and bus bandwidth per size"
)
SIMAI_RESULTS = detector(
    _simai_results,
    "SimAI simulation results (<prefix>EndToEnd.csv): per-layer compute and comm, totals",
)
WORKLOAD_TABLE = detector(
    _workload_table,
    "layer workload tables (ASTRA-sim 1.0, SimAI/AICB, header-row TSV) and "
    "AICB comm CSV / AIOB files",
)
