"""Files of each text format with as many distinct names as asked: ``FILES[format](count)``.

Used by the metric-cap tests (``test_format_caps``), the number fuzz (``test_parse_numbers``)
and ``benchmarks/redos.py``: every name is a metric of its own (or more), in the layout the
format's reader reads (issue 31).
"""

from __future__ import annotations

import json
from collections.abc import Callable


def _rows(head: str, row: Callable[[int], str], count: int, tail: str = "") -> str:
    return head + "".join(row(index) for index in range(count)) + tail


def _pytorch_table(count: int) -> str:
    rule = "  ".join(["-" * 24] + ["-" * 12] * 3) + "\n"
    header = "  ".join(
        ["Name".rjust(24), "Self CPU %".rjust(12), "Self CPU".rjust(12), "# of Calls".rjust(12)]
    )
    return _rows(
        f"{rule}{header}\n{rule}",
        lambda i: (
            "  ".join(
                [f"aten::op{i}".rjust(24), "1.00%".rjust(12), "1.000ms".rjust(12), "1".rjust(12)]
            )
            + "\n"
        ),
        count,
        rule + "Self CPU time total: 1.000s\n",
    )


def _chrome_trace(count: int) -> str:
    events = [
        {"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": i, "dur": 1, "pid": 0, "tid": 7}
        for i in range(count)
    ]
    return json.dumps({"traceEvents": events})


NSYS_HEADER = (
    " Time (%)  Total Time (ns)  Num Calls  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)"
    "  Name\n"
    " --------  ---------------  ---------  --------  --------  --------  --------  -----------"
    "  ----\n"
)
NSYS_ROW = "      0.1             1000          1    1000.0    1000.0      1000      1000"
NCCL_HEAD = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0\n#\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
)
MLLOG = ':::MLLOG {{"key": "{key}", "value": {value}, "time_ms": {time}, "event_type": "{kind}", '
MLLOG += '"metadata": {metadata}}}\n'

#: format → a file of ``count`` distinct names (each one metric or more).
FILES: dict[str, Callable[[int], str]] = {
    "dynamo_csv": lambda n: _rows(
        "dev,name,batch_size,speedup,abs_latency\n", lambda i: f"cuda,model{i},1,1.5,2.0\n", n
    ),
    "ncu_csv": lambda n: _rows(
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Section Name","Metric Name","Metric Unit","Metric Value"\n',
        lambda i: f'"{i}","1","x","h","kernel{i}()","1","7","S","Duration","usecond","1.00"\n',
        n,
    ),
    "nsys_stats": lambda n: _rows(
        "Processing [x.sqlite] with [/opt/reports/cuda_api_sum.py]...\n\n"
        " ** CUDA API Summary (cuda_api_sum):\n\n" + NSYS_HEADER,
        lambda i: f"{NSYS_ROW}          0.0  cudaCall{i}\n",
        n,
    ),
    "nsys_stats_csv": lambda n: _rows(
        '"Time (%)","Total Time (ns)","Num Calls","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
        '"StdDev (ns)","Name"\n',
        lambda i: f"0.1,1000,1,1000.0,1000.0,1000,1000,0.0,cudaCall{i}\n",
        n,
    ),
    "nvprof": lambda n: _rows(
        "==1== Profiling result:\n"
        "            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n",
        lambda i: (
            f" GPU activities:    0.01%  1.0000us         1  1.0000us  1.0000us  1.0000us"
            f"  kernel{i}(float*)\n"
        ),
        n,
    ),
    "pytorch_table": _pytorch_table,
    "deepspeed_comms": lambda n: _rows(
        "",
        lambda i: (
            f"[Rank 0] comm op: op{i} | time (ms): 0.5 | msg size: 1.0 MB | "
            "algbw (Gbps): 1.0 | busbw (Gbps): 1.0\n"
        ),
        n,
    ),
    "megatron_log": lambda n: _rows(
        " iteration        1/     100 | consumed samples:            8 | elapsed time per "
        "iteration (ms): 100.0 | learning rate: 1.000E-04 |\n",
        lambda i: (
            f"[Rank {i}] (after 1 iterations) memory (MB) | allocated: 1.0 | max "
            "allocated: 2.0 | reserved: 3.0 | max reserved: 4.0\n"
        ),
        n,
    ),
    "megatron_trace": lambda n: _rows(
        "", lambda i: f"rank:0:phase{i}(duration=1.0,timestamp={i}.0)\n", n
    ),
    "mlperf_log": lambda n: _rows(
        MLLOG.format(key="run_start", value="null", time=1, kind="INTERVAL_START", metadata="{}"),
        lambda i: MLLOG.format(
            key="eval_accuracy",
            value=0.5,
            time=i + 2,
            kind="POINT_IN_TIME",
            metadata=json.dumps({"metric": f"m{i}"}),
        ),
        n,
    ),
    "mlperf_summary": lambda n: _rows(
        "================\nMLPerf Results Summary\n================\n",
        lambda i: f"m{i} latency (ns) : {i + 1}\n",
        n,
    ),
    "nccl_tests": lambda n: _rows(
        NCCL_HEAD,
        lambda i: (
            f"  {8 * (i + 1):>10}  {2 * (i + 1):>12}     float     sum      -1     10.0"
            "    0.00    0.00      0     10.0    0.00    0.00      0\n"
        ),
        n,
    ),
    "simai_results": lambda n: _rows(
        "layer_name,run,fwd compute,wg compute,ig compute,fwd exposed comm,wg exposed comm,"
        "ig exposed comm\n",
        lambda i: f"layer{i},,1,0,0,0,0,0\n",
        n,
    ),
    "workload_table": lambda n: _rows(
        f"HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n{n}\n",
        lambda i: f"layer{i} -1 1 NONE 0 0 NONE 0 0 NONE 0 1\n",
        n,
    ),
    "chrome_trace": _chrome_trace,
    "nvbench_md": lambda n: _rows(
        "# Benchmark Results\n\n## copy\n\n### [0] NVIDIA H100\n\n"
        "| Elements | Samples | GPU Time | Noise |\n|----------|---------|----------|-------|\n",
        lambda i: f"| {i} | 100x | 1.000 ms | 0.50% |\n",
        n,
    ),
}
