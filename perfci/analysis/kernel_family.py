"""A kernel's family: its name with what a launch configuration or a compiler puts in stripped.

A pull request that changes a tile size, a template argument or a Triton fusion renames the
kernel that does the work (``ampere_sgemm_128x64_tn`` → ``ampere_sgemm_64x64_tn``,
``triton_poi_fused_add_0`` → ``triton_poi_fused_add_1``). :func:`family_of` maps a name to a
:class:`Family` by one rule per source, tried in this order (``docs/kernel-identity.md`` has the
table with examples):

``nccl-algo-proto``
    NCCL collectives: ``ncclKernel_AllReduce_RING_LL_Sum_float`` and
    ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` are ``nccl:AllReduce:Sum:f32``. The algorithm
    (RING, TREE, NVLS …) and protocol (LL, LL128, SIMPLE) are NCCL's choice per message size;
    the collective, the reduction and the element type are the program's.
``triton-index``
    Triton and TorchInductor (``triton_…``, ``cpp_fused_…``): the kernel's index (``_0``)
    and the specialisation signature of older Triton (``_0d1d2de``, also on a user's
    ``@triton.jit`` kernel) are stripped; ``per`` (persistent) and ``red`` (looped)
    reductions are one family, as Inductor picks between them by the reduction's size.
``cutlass-tile``
    CUTLASS instance names (``cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align8``, also
    inside ``cutlass::Kernel2<…>``): tile shapes, stages, cluster shapes and alignments go; the
    architecture, operator class, element types and layout (``nn``, ``tn``) stay.
``fmha-tile``
    PyTorch's memory-efficient attention (``fmha_cutlassF_f32_aligned_64x64_rf_sm80``): tile,
    alignment and register-file/global-memory choice go.
``cublas-tile``
    cuBLAS and cuDNN kernels (``ampere_sgemm_128x64_tn``, ``sm80_xmma_gemm_…_tilesize128x128x8_
    stage3_warpsize2x2x1_…_cublas``): tile, stage, warp, slice, load-width and alignment tokens
    go; the layout, element types and instruction stay.
``cuda-template-config``
    Any other demangled CUDA C++ name (``void at::native::(anonymous namespace)::k<float, 4>(…)``):
    the parameter list goes, and so do the kernel's own template arguments that are numbers,
    booleans or scalar element types (block sizes, vector widths, flags, the dtype); arguments
    that name what it computes (a functor, a policy, a nested template) stay, as do lambda
    numbers. ``(anonymous namespace)``, ``{anonymous}`` and ``<unnamed>`` are spelled alike.
``aten-backend``
    Operators for which ATen picks a backend by shape, dtype and device: the
    ``scaled_dot_product_attention`` backends (flash, efficient, cuDNN, math, flash for CPU)
    and the convolution backends (cuDNN, oneDNN/mkldnn, slow, depthwise, NNPACK …).
``exact``
    Nothing applies: the name is its own family, and never pairs with another name.

Every family name starts with its source (``nccl:``, ``triton:``, ``cutlass:``, ``fmha:``,
``cublas:``, ``cuda:``, ``aten:``), so two families of different sources never compare equal.
Pure string work, linear in the name's length (no backtracking pattern).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RULES", "Family", "family_of"]


@dataclass(frozen=True, slots=True)
class Family:
    """A kernel's family name and the rule that derived it (``exact``: none applied)."""

    name: str
    rule: str

    @property
    def exact(self) -> bool:
        return self.rule == "exact"


# --- NCCL -------------------------------------------------------------------------------------

_NCCL = re.compile(r"^(?:void\s+)?nccl(?:Dev)?Kernel_(\w+)")
_NCCL_ALGORITHMS = frozenset(
    {"RING", "TREE", "COLLNET", "COLLNETDIRECT", "COLLNETCHAIN", "DIRECT", "CHAIN", "NVLS", "PAT"}
)
_NCCL_PROTOCOLS = frozenset({"LL", "LL128", "SIMPLE"})
_NCCL_REDOPS = frozenset({"Sum", "Prod", "Min", "Max", "PreMulSum", "SumPostDiv", "Avg"})
#: Collectives that combine values: their reduction and element type are part of the family.
_NCCL_REDUCING = frozenset({"AllReduce", "ReduceScatter", "Reduce"})
_NCCL_TYPES = {
    "float": "f32",
    "half": "f16",
    "double": "f64",
    "__nv_bfloat16": "bf16",
    "bfloat16": "bf16",
    "int8_t": "i8",
    "uint8_t": "u8",
    "int32_t": "i32",
    "uint32_t": "u32",
    "int64_t": "i64",
    "uint64_t": "u64",
    "__nv_fp8_e4m3": "f8e4m3",
    "__nv_fp8_e5m2": "f8e5m2",
}


def _nccl(name: str) -> str | None:
    match = _NCCL.match(name)
    if match is None:
        return None
    tokens = match[1].split("_")
    collective, rest = tokens[0], tokens[1:]
    kept = [t for t in rest if t not in _NCCL_ALGORITHMS and t not in _NCCL_PROTOCOLS]
    redop = next((t for t in kept if t in _NCCL_REDOPS), None)
    raw = "_".join(t for t in kept if t not in _NCCL_REDOPS)  # ``int8_t`` holds a ``_``
    dtype = _NCCL_TYPES.get(raw, raw)
    if collective not in _NCCL_REDUCING:
        return f"nccl:{collective}"
    return ":".join(p for p in ("nccl", collective, redop, dtype) if p)


# --- Triton / TorchInductor -------------------------------------------------------------------

_TRITON = re.compile(r"^(triton|cpp)_(\w+)$")
_TRITON_USER = re.compile(r"^[A-Za-z_]\w*[A-Za-z0-9]$")
_SIGNATURE_GROUP = re.compile(r"(\d+)([cde]*)")
_SIGNATURE_CHARS = frozenset("0123456789cde")
_INDEX = re.compile(r"_\d+$")
_REDUCTIONS = {"per": "red", "red": "red"}


def _strip_signature(name: str) -> str:
    """``name`` without an older Triton specialisation suffix (``_0d1d2de``): argument indexes
    from 0 upwards, each with its flags, at least one flag in all."""
    head, _, last = name.rpartition("_")
    if not head or not last[:1].isdigit() or not set(last) <= _SIGNATURE_CHARS:
        return name
    if last.isdigit():
        return name
    indexes = [int(i) for i, _ in _SIGNATURE_GROUP.findall(last)]
    if indexes[0] != 0 or any(b <= a for a, b in itertools.pairwise(indexes)):
        return name
    return head


def _triton(name: str) -> str | None:
    stripped = _strip_signature(name.strip())
    match = _TRITON.match(stripped)
    if match is None and stripped != name.strip() and _TRITON_USER.match(stripped):
        return f"triton:{stripped}"  # a user's @triton.jit kernel with its signature
    if match is None or (match[1] == "cpp" and not match[2].startswith("fused_")):
        return None
    source, rest = match[1], _INDEX.sub("", match[2])
    head, _, tail = rest.partition("_")
    head = _REDUCTIONS.get(head, head)
    stem = f"{head}_{tail}" if tail else head
    if not stem.strip("_"):  # ``triton__0d1d2de``: nothing but the signature names it
        return None
    return f"triton:{source}_{stem}"


# --- tiled library kernels (CUTLASS, fmha, cuBLAS/cuDNN) --------------------------------------

_CUTLASS = re.compile(r"\b(cutlass(?:3x)?_\w+)")
_FMHA = re.compile(r"^(?:void\s+)?(fmha_\w+)")
_CUBLAS = re.compile(
    r"^(?:void\s+)?((?:sm\d+_xmma|maxwell|pascal|volta|turing|ampere|hopper|ada|blackwell)_\w+)"
)
#: Tokens (between underscores) that are a launch configuration: a tile, warp or cluster
#: shape, a stage count, a slicing, a load width, an alignment.
_CONFIG_TOKEN = re.compile(
    r"^(?:\d+(?:x\d+)*|(?:tilesize|warpsize|warpgroupsize|clustersize|tensor|sliced|stage|ldg|"
    r"align[a-z]?|k)\d+(?:x\d+)*|stages)$"
)
_FMHA_CHOICES = frozenset({"aligned", "notaligned", "rf", "gmem"})


def _strip_tokens(identifier: str, extra: frozenset[str] = frozenset()) -> str:
    tokens = identifier.split("_")
    return "_".join(t for t in tokens if not _CONFIG_TOKEN.match(t) and t not in extra)


def _cutlass(name: str) -> str | None:
    match = _CUTLASS.search(name)
    if match is None or not any(_CONFIG_TOKEN.match(t) for t in match[1].split("_")[2:]):
        return None
    head, _, rest = match[1].partition("_")  # the arch (``80``, ``sm90``) is the next token
    arch, _, rest = rest.partition("_")
    return f"cutlass:{head}_{arch}_{_strip_tokens(rest)}"


def _fmha(name: str) -> str | None:
    match = _FMHA.match(name)
    return None if match is None else f"fmha:{_strip_tokens(match[1], _FMHA_CHOICES)}"


def _cublas(name: str) -> str | None:
    match = _CUBLAS.match(name)
    if match is None or not any(word in match[1] for word in ("gemm", "conv", "cudnn")):
        return None
    return f"cublas:{_strip_tokens(match[1])}"


# --- demangled CUDA C++ -----------------------------------------------------------------------

_ANONYMOUS = re.compile(r"\(anonymous namespace\)|\{anonymous\}|<unnamed>|`anonymous namespace'")
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = frozenset(_OPEN.values())
_LITERAL = re.compile(r"^(?:\([\w: ]+\))?-?\d+[uUlL]*$|^(?:true|false)$")
_SCALAR_TYPES = frozenset(
    {
        "float",
        "double",
        "int",
        "long",
        "short",
        "char",
        "bool",
        "signed char",
        "unsigned char",
        "unsigned int",
        "unsigned long",
        "unsigned short",
        "long long",
        "unsigned long long",
        "__half",
        "__nv_bfloat16",
        "c10::Half",
        "c10::BFloat16",
        "c10::Float8_e4m3fn",
        "c10::Float8_e5m2",
        "c10::complex<float>",
        "c10::complex<double>",
        "at::Half",
        "at::BFloat16",
        "half",
        "int8_t",
        "uint8_t",
        "int16_t",
        "int32_t",
        "uint32_t",
        "int64_t",
        "uint64_t",
    }
)


def _close_of(text: str, start: int) -> int | None:
    """Index of the bracket closing ``text[start]``, or ``None`` when unbalanced."""
    stack = [_OPEN[text[start]]]
    for i in range(start + 1, len(text)):
        char = text[i]
        if char == ">" and text[i - 1] == "-" and stack[-1] != ">":
            continue  # ``->`` inside a parameter list or a lambda's return type
        if char in _OPEN:
            stack.append(_OPEN[char])
        elif char in _CLOSE:
            if char != stack[-1]:
                return None
            stack.pop()
            if not stack:
                return i
    return None


def _split_arguments(text: str) -> list[str] | None:
    """Top-level comma-separated arguments of a template argument list (without its ``<>``)."""
    args, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    if depth != 0:
        return None
    args.append(text[start:].strip())
    return args


def _cuda_cpp(name: str) -> str | None:
    text = _ANONYMOUS.sub("(anon)", name.strip())
    text = text.removeprefix("void ").strip()
    qualified = re.match(r"[\w:~]*(?:\(anon\)[\w:~]*)*", text)
    end = qualified.end() if qualified else 0
    if end == 0 or end == len(text) or text[end] not in "<(":
        return None
    base = text[:end]
    if text[end] == "(":  # no template: only the parameter list goes
        return f"cuda:{base}" if _close_of(text, end) is not None else None
    close = _close_of(text, end)
    args = _split_arguments(text[end + 1 : close]) if close is not None else None
    if args is None:
        return None
    kept = [a for a in args if not _LITERAL.match(a) and a not in _SCALAR_TYPES]
    return f"cuda:{base}<{', '.join(kept)}>"


# --- ATen operators whose backend is picked by shape ------------------------------------------

_SDPA = re.compile(
    r"^aten::_scaled_dot_product_(?:flash_attention(?:_for_cpu)?|efficient_attention|"
    r"cudnn_attention|attention_math(?:_for_mps)?|fused_attention_overrideable)(_backward)?$"
)
_CONVOLUTION = re.compile(
    r"^aten::(?:cudnn_convolution|miopen_convolution|mkldnn_convolution|_slow_conv2d_forward|"
    r"slow_conv3d_forward|thnn_conv2d|_nnpack_spatial_convolution|_conv_depthwise2d|"
    r"conv_depthwise3d|slow_conv_dilated[23]d)$"
)


def _aten(name: str) -> str | None:
    match = _SDPA.match(name)
    if match is not None:
        return "aten:scaled_dot_product_attention" + ("_backward" if match[1] else "")
    if _CONVOLUTION.match(name):
        return "aten:convolution"
    return None


#: The rules in the order they are tried: the first that recognises a name gives its family.
RULES: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("nccl-algo-proto", _nccl),
    ("triton-index", _triton),
    ("cutlass-tile", _cutlass),
    ("fmha-tile", _fmha),
    ("cublas-tile", _cublas),
    ("aten-backend", _aten),
    ("cuda-template-config", _cuda_cpp),
)

#: Longer names are not normalised (a name is capped far below this by the parsers anyway).
_MAX_NAME = 8192


def family_of(name: str) -> Family:
    """The family of a kernel (or operator) name by the first rule of :data:`RULES` that
    recognises it; ``Family(name, "exact")`` when none does."""
    if len(name) <= _MAX_NAME:
        for rule, derive in RULES:
            found = derive(name)
            if found is not None:
                return Family(found, rule)
    return Family(name, "exact")
