"""Kernel families (perfci.analysis.kernel_family) and which missing and new kernels pair.

The names are real: the kernels of the example on an H200 (``data/h200_ab``), and CUTLASS,
cuBLAS, Triton/Inductor and NCCL names as profilers print them in public traces and reports
(``docs/kernel-identity.md`` lists the rules). Look-alike names of different families must
never pair.
"""

from __future__ import annotations

import pytest

from perfci.analysis.kernel_family import RULES, family_of
from perfci.analysis.renames import find_renames
from perfci.core.model import Device, MetricKind, SeriesKey

XMMA_128 = (
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas"
)
XMMA_256 = (
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_"
    "alignc4_execute_kernel__5x_cublas"
)


@pytest.mark.parametrize(
    ("name", "family", "rule"),
    [
        ("ampere_sgemm_128x64_tn", "cublas:ampere_sgemm_tn", "cublas-tile"),
        ("ampere_sgemm_64x64_tn", "cublas:ampere_sgemm_tn", "cublas-tile"),
        ("ampere_sgemm_64x64_nn", "cublas:ampere_sgemm_nn", "cublas-tile"),
        (
            "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
            "cublas:ampere_fp16_s16816gemm_fp16_f2f_nn",
            "cublas-tile",
        ),
        (
            XMMA_128,
            "cublas:sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma_execute_kernel__5x_cublas",
            "cublas-tile",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>"
            "(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)",
            "cutlass:cutlass_80_simt_sgemm_nt",
            "cutlass-tile",
        ),
        (
            "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align8",
            "cutlass:cutlass_80_tensorop_s1688gemm_nn",
            "cutlass-tile",
        ),
        (
            "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x128x64_1x2x1_0_tnn_align8_"
            "warpspecialized_cooperative_epi_tma",
            "cutlass:cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_tnn_warpspecialized_"
            "cooperative_epi_tma",
            "cutlass-tile",
        ),
        (
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel"
            "<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
            "fmha:fmha_cutlassF_f32_sm80",
            "fmha-tile",
        ),
        ("triton_poi_fused_add_0", "triton:triton_poi_fused_add", "triton-index"),
        ("triton_poi_fused_add_0_0d1d2de", "triton:triton_poi_fused_add", "triton-index"),
        (
            "triton_per_fused_native_layer_norm_3",
            "triton:triton_red_fused_native_layer_norm",
            "triton-index",
        ),
        (
            "triton_red_fused_native_layer_norm_7",
            "triton:triton_red_fused_native_layer_norm",
            "triton-index",
        ),
        ("matmul_kernel_0d1d2d3d4d5d6d7c8d9c10d11c", "triton:matmul_kernel", "triton-index"),
        ("cpp_fused_add_mul_4", "triton:cpp_fused_add_mul", "triton-index"),
        ("triton__0d1d2de", "triton__0d1d2de", "exact"),  # nothing but the signature
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "nccl:AllReduce:Sum:f32",
            "nccl-algo-proto",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "nccl:AllReduce:Sum:f32",
            "nccl-algo-proto",
        ),
        (
            "ncclKernel_AllReduce_TREE_LL128_Sum___nv_bfloat16",
            "nccl:AllReduce:Sum:bf16",
            "nccl-algo-proto",
        ),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "nccl:AllGather", "nccl-algo-proto"),
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, true, false>"
            "(float*, float const*, int, int, int, bool const*, int, bool)",
            "cuda:(anon)::softmax_warp_forward<>",
            "cuda-template-config",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
            "cuda:at::native::vectorized_elementwise_kernel<at::native::FillFunctor<float>, "
            "std::array<char*, 1ul>>",
            "cuda-template-config",
        ),
        (
            "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, false>(int)",
            "cuda:at::native::(anon)::vectorized_layer_norm_kernel<>",
            "cuda-template-config",
        ),
        (
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten:scaled_dot_product_attention",
            "aten-backend",
        ),
        (
            "aten::_scaled_dot_product_attention_math",
            "aten:scaled_dot_product_attention",
            "aten-backend",
        ),
        ("aten::mkldnn_convolution", "aten:convolution", "aten-backend"),
        ("aten::addmm", "aten::addmm", "exact"),
        ("Memset (Device)", "Memset (Device)", "exact"),
        # Truncated by a profiler: unbalanced, so left whole rather than guessed.
        (
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::sin_kernel_cuda(",
            "void at::native::vectorized_elementwise_kernel<(int)4, at::native::sin_kernel_cuda(",
            "exact",
        ),
    ],
)
def test_family_rules(name: str, family: str, rule: str) -> None:
    found = family_of(name)
    assert (found.name, found.rule) == (family, rule)


def _kernels(*names: str, kind: MetricKind = MetricKind.KERNEL) -> list[SeriesKey]:
    return [SeriesKey(kind=kind, name=n, device=Device.GPU) for n in names]


def _pairs(missing: list[SeriesKey], new: list[SeriesKey]) -> set[tuple[str, str, str]]:
    renames, _ = find_renames(missing, new)
    return {(r.old.name, r.new.name, r.family.rule) for r in renames}


def test_renamed_cutlass_kernels_pair_within_their_layout() -> None:
    """A shape change makes cuBLAS pick another CUTLASS tile for the ``nt`` GEMM; its other
    ``nt`` and ``nn`` kernels stay (the example's kernels on an H200, ``data/h200_ab``)."""
    base = {
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>"
        "(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>"
        "(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>"
        "(cutlass_80_simt_sgemm_256x128_8x4_nt_align1::Params)",
        XMMA_128,
    }
    new_name = (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>"
        "(cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)"
    )
    old_name = next(n for n in base if "128x256_8x4_nt" in n)
    pr = (base - {old_name}) | {new_name}
    assert _pairs(_kernels(*(base - pr)), _kernels(*(pr - base))) == {
        (old_name, new_name, "cutlass-tile")
    }


def test_renamed_triton_kernels_pair_when_inductor_renumbers_them() -> None:
    """A new fused kernel shifts the indexes of the ones after it; each family still has one
    missing and one new member, and the new fusion (``mul``) pairs with nothing."""
    base = {
        "triton_poi_fused_add_0",
        "triton_per_fused_native_layer_norm_1",
        "triton_poi_fused_gelu_2",
        "triton_poi_fused_add_3",
    }
    pr = {
        "triton_poi_fused_add_0",
        "triton_poi_fused_mul_1",
        "triton_red_fused_native_layer_norm_2",
        "triton_poi_fused_gelu_3",
        "triton_poi_fused_add_4",
    }
    assert _pairs(_kernels(*(base - pr)), _kernels(*(pr - base))) == {
        (
            "triton_per_fused_native_layer_norm_1",
            "triton_red_fused_native_layer_norm_2",
            "triton-index",
        ),
        ("triton_poi_fused_gelu_2", "triton_poi_fused_gelu_3", "triton-index"),
        ("triton_poi_fused_add_3", "triton_poi_fused_add_4", "triton-index"),
    }


@pytest.mark.parametrize(
    ("missing", "new"),
    [
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_nn"),  # another layout
        ("ampere_sgemm_128x64_tn", "ampere_hgemm_128x64_tn"),  # another precision
        (XMMA_128, "cutlass_80_simt_sgemm_128x128_8x4_tn_align1"),  # cuBLAS vs CUTLASS
        (
            "cutlass_80_simt_sgemm_128x64_8x5_nn_align1",
            "cutlass_80_tensorop_s1688gemm_128x64_32x6_nn_align1",
        ),
        ("triton_poi_fused_add_0", "triton_poi_fused_add_mul_0"),  # another fusion
        ("triton_poi_fused_add_0", "triton_red_fused_add_0"),  # pointwise vs reduction
        ("triton_poi_fused_add_0", "cpp_fused_add_0"),  # GPU Triton vs CPU C++
        ("triton__0d1d2de", "triton__0d1d2d3de"),  # only a signature: no family
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_AllReduce_RING_LL_Sum_half"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_ReduceScatter_RING_LL_Sum_float"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_AllReduce_RING_LL_Max_float"),
        (
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80",
            "fmha_cutlassB_f32_aligned_64x64_k64_sm80",
        ),  # forward vs backward
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul>)",
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
        ),  # one template, two functors
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, true, false>"
            "(float*, float const*, int, int, int, bool const*, int, bool)",
            "void (anonymous namespace)::softmax_warp_backward<float, float, float, 9, true, false>"
            "(float*, float const*, float const*, int, int, int, bool const*)",
        ),
        ("aten::addmm", "aten::mm"),
        (
            "aten::_scaled_dot_product_flash_attention_for_cpu",
            "aten::_scaled_dot_product_attention_math_backward",
        ),
        ("gemm_kernel_128x64", "gemm_kernel_64x64"),  # no rule knows this source
    ],
)
def test_look_alikes_of_different_families_never_pair(missing: str, new: str) -> None:
    assert family_of(missing).name != family_of(new).name or family_of(missing).exact
    assert _pairs(_kernels(missing), _kernels(new)) == set()


def test_same_family_across_kinds_sections_or_units_never_pairs() -> None:
    old = SeriesKey(kind=MetricKind.KERNEL, name="ampere_sgemm_128x64_tn", section="fwd")
    assert _pairs([old], _kernels("ampere_sgemm_64x64_tn", kind=MetricKind.OP)) == set()
    other_section = SeriesKey(kind=MetricKind.KERNEL, name="ampere_sgemm_64x64_tn", section="bwd")
    assert _pairs([old], [other_section]) == set()
    step = SeriesKey(kind=MetricKind.STEP, name="ampere_sgemm_128x64_tn")
    assert _pairs([step], [SeriesKey(kind=MetricKind.STEP, name="ampere_sgemm_64x64_tn")]) == set()


def test_an_ambiguous_family_is_left_unpaired_with_a_note() -> None:
    missing = _kernels("ampere_sgemm_128x64_tn", "ampere_sgemm_128x128_tn")
    new = _kernels("ampere_sgemm_64x64_tn", "ampere_sgemm_32x128_tn")
    renames, notes = find_renames(missing, new)
    assert renames == []
    assert notes == [
        "2 missing and 2 new kernels of one family (cublas:ampere_sgemm_tn, rule cublas-tile) "
        "were not paired: which replaced which cannot be told from their names."
    ]


HOSTILE = [
    "_" * 8000,
    "triton_poi_" + "0d" * 3990,
    "triton_" + "1" * 8000 + "x",
    "<" * 4000 + ">" * 4000,
    "void k<" + "a<" * 3000 + ">",
    "sm80_xmma_gemm_" + "1x" * 3990,
    "cutlass_80_" + "128x" * 1990 + "_nn",
    "ncclKernel_" + "RING_" * 1590,
    "(anonymous namespace)::" * 340 + "k<1>(",
    "void " + "a::" * 2600 + "k<float, 4>()",
]


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_names_get_a_family_in_one_pass(name: str) -> None:
    """Kernel names come from the pull request: every rule is a scan or an anchored pattern
    with no nested repetition, so an 8 KB name of repeated pieces is one pass (run by
    ``benchmarks/kernel_family.py`` for the time it takes)."""
    found = family_of(name)
    assert found.rule in {"exact", *(rule for rule, _ in RULES)}
