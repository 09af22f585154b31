//! The built-in rules on real kernel names: one test per finding, each naming where the name
//! comes from (a committed corpus trace under traces/corpus/, a reference trace, or the
//! engine's source when no public trace has it). Long names are cut to their first few
//! hundred characters where said; the rules read a name from its start.

use gapscope_analyzer::{Bucket, RuleSet};

/// Asserts the bucket through both classification and `--explain`, which must agree.
fn assert_bucket(name: &str, want: Bucket) {
    let rules = RuleSet::builtin();
    let e = rules.explain(name);
    let why = e
        .rule
        .as_ref()
        .map(|r| format!("rule {:?} matched {:?}", r.rule, r.matched))
        .unwrap_or_else(|| "no rule".to_owned());
    assert_eq!(e.bucket, want, "{name}: {why}");
    assert_eq!(rules.classify_kernel(name), want, "{name}");
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: 29% of kernel time, was act_elementwise ("swiGlu").
#[test]
fn trtllm_gen_fp4_moe_gemm_with_swiglu_is_moe_not_act_elementwise() {
    assert_bucket(
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
        Bucket::Moe,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: 19% of kernel time, was other.
#[test]
fn trtllm_gen_bf16_x_fp4_moe_gemm_is_moe() {
    assert_bucket(
        "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
        Bucket::Moe,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: was gemm_dense ("cutlass" in its template arguments).
#[test]
fn trtllm_moe_finalize_is_moe_not_gemm_dense() {
    assert_bucket(
        "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true>)",
        Bucket::Moe,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: the router's histogram and offsets kernels, were other.
#[test]
fn trtllm_moe_router_histogram_is_moe() {
    assert_bucket(
        "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)",
        Bucket::Moe,
    );
    assert_bucket(
        "void moe::dev::routing::routingIndicesOffsetsKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)",
        Bucket::Moe,
    );
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: 66% of kernel time, was gemm_quant ("mxfp4").
#[test]
fn triton_matmul_ogs_mxfp4_moe_gemm_is_moe_not_gemm_quant() {
    assert_bucket(
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
        Bucket::Moe,
    );
    assert_bucket("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", Bucket::Moe);
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: was gemm_dense ("matmul").
#[test]
fn triton_moe_finalize_scatter_is_moe_not_gemm_dense() {
    assert_bucket("_finalize_matmul_scatter_bf16", Bucket::Moe);
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: triton_kernels routing, were other.
#[test]
fn triton_moe_routing_is_moe_not_other() {
    assert_bucket("_combined_routing_compute", Bucket::Moe);
    assert_bucket("_combined_routing_memset", Bucket::Moe);
    assert_bucket("_sum_bitmatrix_rows", Bucket::Moe);
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: the router's top-k (24 calls, one per layer), was sampling.
#[test]
fn triton_moe_router_topk_is_moe_not_sampling() {
    assert_bucket("_topk_forward", Bucket::Moe);
}

/// vLLM Marlin MoE kernel as a public nsys/Kineto report lists it (find_string "void marlin_moe_wna16::").
#[test]
fn marlin_moe_gemm_is_moe() {
    assert_bucket(
        "void marlin_moe_wna16::Marlin<1125899906909960l, 562949953487106l, 1125899906909960l, 2814749767106568l, 128, 4, 8, 4, false, 4, 2, false>(int4 const*, int4 const*, int4*, int4*, int4 const*, float const*, int4 const*, float const*)",
        Bucket::Moe,
    );
}

/// DeepGEMM masked grouped GEMM ((deep_gemm::GemmType)2) from a public SGLang B200 kernel report; was gemm_dense.
#[test]
fn deepgemm_grouped_fp8_fp4_moe_gemm_is_moe() {
    assert_bucket(
        "void deep_gemm::sm100_fp8_fp4_gemm_1d1d_impl<(cute::UMMA::Major)0, (cute::UMMA::Major)0, 32u, 32u, 0u, 768u, 6144u, 128u, 128u, 128u, 129u, 128u, 128u, 128u, 8u, 128u, 128u, 2u, true, 148u, true, (deep_gemm::GemmType)2, false, cutlass::float_e4m3_t, cutlass::float_e4m3_t, cutlass::bfloat16_t, deep_gemm::epilogue::transform::EpilogueIdentity>(int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
        Bucket::Moe,
    );
}

/// DeepGEMM normal GEMM ((deep_gemm::GemmType)0) from a public report: FP8 block-scaled weights, like cutlass_scaled_mm; was gemm_dense.
#[test]
fn deepgemm_dense_fp8_gemm_is_gemm_quant() {
    assert_bucket(
        "void deep_gemm::sm90_fp8_gemm_1d2d_impl<(cute::UMMA::Major)0, 0u, 4096u, 1024u, 1u, 256u, 128u, 128u, 128u, 128u, 128u, 3u, 128u, 256u, 2u, true, 132u, (deep_gemm::GemmType)0, deep_gemm::epilogue::transform::EpilogueIdentity>(float*, int*, unsigned int, unsigned int, unsigned int, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
        Bucket::GemmQuant,
    );
}

/// SGLang MoE router kernels as public kernel reports list them (find_string "count_and_sort_expert_tokens_kernel").
#[test]
fn sglang_moe_gate_and_expert_sort_are_moe() {
    assert_bucket("moe_fused_gate_kernel", Bucket::Moe);
    assert_bucket(
        "void count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, unsigned long)",
        Bucket::Moe,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: was attention, through the `flashinfer::` namespace of an argument type.
#[test]
fn trtllm_fp4_quantize_is_quantize_not_attention() {
    assert_bucket(
        "void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, int, int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, flashinfer::QuantizationSFLayout)",
        Bucket::Quantize,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: was gemm_quant.
#[test]
fn vllm_fp8_activation_quant_is_quantize_not_gemm_quant() {
    assert_bucket(
        "void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, int, long, long)",
        Bucket::Quantize,
    );
}

/// vLLM csrc/quantization kernels (fp8/common.cu, fp4/nvfp4_quant_kernels.cu), demangled as nsys prints them.
#[test]
fn vllm_dynamic_per_token_fp8_and_fp4_quant_are_quantize() {
    assert_bucket(
        "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, float*, c10::BFloat16 const*, float const*, int)",
        Bucket::Quantize,
    );
    assert_bucket(
        "void vllm::segmented_max_reduction<c10::BFloat16, c10::Float8_e4m3fn>(float*, c10::BFloat16 const*, long)",
        Bucket::Quantize,
    );
    assert_bucket(
        "void vllm::cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*)",
        Bucket::Quantize,
    );
}

/// SGLang/vLLM Triton and sgl_kernel quantizers (kernel names from their benchmark scripts).
#[test]
fn sglang_per_token_group_quant_is_quantize() {
    assert_bucket("_per_token_group_quant_fp8", Bucket::Quantize);
    assert_bucket("per_token_group_quant_8bit_kernel", Bucket::Quantize);
    assert_bucket("per_tensor_quant_fp8_kernel", Bucket::Quantize);
    assert_bucket("per_tensor_absmax_kernel", Bucket::Quantize);
}

/// llama.cpp ggml-cuda quantize.cu: q8_1 for MMVQ (was gemv) and the MMQ layout (was gemm_quant); demangled from the source signatures.
#[test]
fn llama_cpp_activation_quantize_is_quantize() {
    assert_bucket(
        "quantize_q8_1(float const*, void*, long, long, long, long, long, int, int)",
        Bucket::Quantize,
    );
    assert_bucket(
        "void quantize_mmq_q8_1<(mmq_q8_1_ds_layout)1>(float const*, int const*, void*, long, long, long, long, long, int, int)",
        Bucket::Quantize,
    );
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz: aiter's add+RMSNorm+quant, mangled as the trace has it and demangled; vLLM's rms_norm_cvt_fp16_to_fp4.
#[test]
fn norm_with_fused_quant_stays_norm() {
    assert_bucket(
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
        Bucket::Norm,
    );
    assert_bucket(
        "void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, true, false, true, 1>(std::bfloat16_t*, std::bfloat16_t*, float*, std::bfloat16_t*, std::bfloat16_t*, std::bfloat16_t*, double, int, int, int, int, int, int, int, bool)",
        Bucket::Norm,
    );
    assert_bucket(
        "void vllm::rms_norm_cvt_fp16_to_fp4<c10::BFloat16, false>(int, int, c10::BFloat16 const*, c10::BFloat16 const*, float const*, float, unsigned int*, unsigned int*)",
        Bucket::Norm,
    );
}

/// vLLM act_and_mul_quant_kernel and silu_mul_cvt_fp16_to_fp4 (csrc sources).
#[test]
fn activation_with_fused_quant_stays_act_elementwise() {
    assert_bucket(
        "void vllm::act_and_mul_quant_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, int)",
        Bucket::ActElementwise,
    );
    assert_bucket(
        "void vllm::silu_mul_cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*)",
        Bucket::ActElementwise,
    );
}

/// FlashInfer's RMSNorm as public nsys reports print it; was attention through `flashinfer::`.
#[test]
fn flashinfer_namespace_does_not_make_attention() {
    assert_bucket(
        "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)",
        Bucket::Norm,
    );
}

/// FlashInfer decode attention keeps its bucket through its function name.
#[test]
fn flashinfer_attention_still_attention() {
    assert_bucket(
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, flashinfer::PageStorage::kIndices, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>(...)",
        Bucket::Attention,
    );
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: ck_tile RMSNorm, mangled as the trace has it and demangled (c++filt); the demangled one was gemm_dense through `ck_tile::`.
#[test]
fn ck_tile_namespace_does_not_make_gemm() {
    assert_bucket(
        "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_",
        Bucket::Norm,
    );
    assert_bucket(
        "void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<ck_tile::Rmsnorm2dFwdPipelineOnePass<ck_tile::Rmsnorm2dFwdPipelineProblem<std::bfloat16_t, std::bfloat16_t, float, std::bfloat16_t, std::bfloat16_t, std::bfloat16_t, float, float, ck_tile::Generic2dBlockShape<ck_tile::sequence<1, 3072>, ck_tile::sequence<1, 128>, ck_tile::sequence<1, 8> >, ck_tile::Rmsnorm2dFwdTraits<true, false, false, false, (ck_tile",
        Bucket::Norm,
    );
}

/// llama.cpp ggml-cuda cpy.cu: cpy_q_f32 dequantizes a q8_0 KV cache (was gemm_quant through `dequantize_q8_0` in its template argument), cpy_f32_q quantizes into it.
#[test]
fn ggml_quantized_copies_are_copy_not_gemm_quant() {
    assert_bucket(
        "void cpy_q_f32<&(void cpy_blck_q_f32<&(dequantize_q8_0(void const*, long, int, float2&)), 32>(char const*, char*)), 32>(char const*, char*, int, int, int, int, int, int, int, int, int, int, int, int, int, int)",
        Bucket::Copy,
    );
    assert_bucket(
        "void cpy_f32_q<&(cpy_blck_f32_q8_0(char const*, char*)), 32>(char const*, char*, int, int, int, int, int, int, int, int, int, int, int, int, int, int)",
        Bucket::Copy,
    );
    assert_bucket(
        "void k_set_rows_quant<long, block_q8_0, 32, &(quantize_f32_q8_0_block(float const*, block_q8_0*))>(float const*, long const*, block_q8_0*, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long)",
        Bucket::Copy,
    );
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz and traces/corpus/hta_a100_train_nccl.json.gz: cuDNN convolutions with a fused ReLU, were act_elementwise ("relu").
#[test]
fn old_cudnn_convolutions_with_relu_are_conv() {
    assert_bucket("volta_scudnn_128x64_relu_interior_nn_v1", Bucket::Conv);
    assert_bucket(
        "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1",
        Bucket::Conv,
    );
    assert_bucket(
        "cudnn_infer_ampere_scudnn_128x64_relu_xregs_large_nn_v1",
        Bucket::Conv,
    );
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz: was other.
#[test]
fn cudnn_conv_without_relu_is_conv() {
    assert_bucket(
        "volta_scudnn_128x128_stridedB_splitK_small_nn_v1",
        Bucket::Conv,
    );
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz: 25% of kernel time, was other.
#[test]
fn cudnn_dgrad_and_wgrad_engines_are_conv() {
    assert_bucket(
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, int, int)",
        Bucket::Conv,
    );
    assert_bucket(
        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
        Bucket::Conv,
    );
    assert_bucket(
        "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*, float, int, int)",
        Bucket::Conv,
    );
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz and traces/corpus/hta_a100_train_nccl.json.gz: were gemm_dense ("sgemm", "xmma", "cutlass").
#[test]
fn implicit_gemm_convolutions_are_conv_not_gemm_dense() {
    assert_bucket(
        "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)",
        Bucket::Conv,
    );
    assert_bucket(
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train",
        Bucket::Conv,
    );
    assert_bucket(
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn_infer",
        Bucket::Conv,
    );
    assert_bucket(
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4>(cutlass_tensorop_s1688dgrad_optimized_tf32_64x128_32x3_nhwc_align4::Params)",
        Bucket::Conv,
    );
    assert_bucket(
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4>(cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4::Params)",
        Bucket::Conv,
    );
    assert_bucket(
        "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixShapeILi128ELi32EEENS_10tfloat32_tENS_9transform29PitchLinearWarpRakedThreadM",
        Bucket::Conv,
    );
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz: were other.
#[test]
fn winograd_transforms_and_im2col_are_conv() {
    assert_bucket(
        "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(cudnn::winograd_nonfused::WinogradOutputParams<float, float>)",
        Bucket::Conv,
    );
    assert_bucket(
        "void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_params, cudnnConvolutionStruct, cudnnTensor4dStruct, float const*, float*)",
        Bucket::Conv,
    );
    assert_bucket(
        "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)",
        Bucket::Conv,
    );
}

/// traces/reference/hf-llama3-8b-npl1.json.gz: cuDNN SDPA says "fprop" and stays attention.
#[test]
fn cudnn_sdpa_is_not_conv() {
    assert_bucket(
        "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1x1_cga1x1x1_kernel0_0",
        Bucket::Attention,
    );
}

/// PyTorch's depthwise convolution kernel (aten/src/ATen/native/cuda/DepthwiseConv2d.cu), the causal-conv1d package's kernel and llama.cpp's ssm_conv: all conv (the recurrence stays linear_attn_ssm).
#[test]
fn depthwise_conv_and_the_causal_conv1d_of_recurrent_layers_are_conv() {
    assert_bucket(
        "void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<1, c10::BFloat16, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 4ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 4ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 4ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, bool, int, int, int, int, int, int, int, int, int, int, int, int, int)",
        Bucket::Conv,
    );
    assert_bucket(
        "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, c10::BFloat16> >(ConvParamsBase)",
        Bucket::Conv,
    );
    // llama.cpp's: the conv of a Qwen3.5 gated-DeltaNet layer, beside the recurrence.
    assert_bucket(
        "void ssm_conv_f32<true, 128ul, 4ul>(float const*, float const*, float const*, int)",
        Bucket::Conv,
    );
    assert_bucket(
        "void gated_delta_net_cuda<128, false, false>(float const*, float const*, float const*)",
        Bucket::LinearAttnSsm,
    );
    // The decay's softplus in llama.cpp's fused gated unary kernel.
    assert_bucket(
        "void unary_gated_op_kernel<&_INTERNAL_484bb514_8_unary_cu_eb6d5366::op_softplus(float)>(float const*)",
        Bucket::ActElementwise,
    );
}

/// traces/corpus/hta_a100_train_nccl.json.gz: 9% of kernel time, was other. Decision: data movement is copy even around a convolution.
#[test]
fn cudnn_layout_transforms_are_copy() {
    assert_bucket(
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
        Bucket::Copy,
    );
    assert_bucket(
        "void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false, (cudnnKernelDataType_t)0>(cudnn::ops::nhwc2nchw_params_t<float>, float const*, float*)",
        Bucket::Copy,
    );
}

/// traces/corpus/hta_a100_train_nccl.json.gz and traces/corpus/kineto_v100_resnet50_oldschema.json.gz: 17% and 16% of kernel time, were other.
#[test]
fn cudnn_batch_norm_is_norm() {
    assert_bucket(
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float*, float*, float const*, float const*, float)",
        Bucket::Norm,
    );
    assert_bucket(
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)",
        Bucket::Norm,
    );
    assert_bucket(
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
        Bucket::Norm,
    );
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz.
#[test]
fn rocm_hipblaslt_gemm_is_gemm_dense() {
    assert_bucket(
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTLA0_DTLB0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8_GSUAMBSK_GLS0_ISA942_IU1_K1_LDSTI0_LBSPPA512_LBSPPB256_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT4_2_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK0_SKFTR0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB2_WSGRA0_WSGRB0_WS64_WG64_4_1",
        Bucket::GemmDense,
    );
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz and traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz.
#[test]
fn rocm_paged_and_unified_attention_are_attention() {
    assert_bucket(
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, 1, 128, 256, false, 4, 1, ck_tile::ComposedAttention<0u, false> >(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16 const*, float, int const*, int const*, int const*, float const*, int, int, int, int, float*, float*, __hip_bfloat16*, float, float, float const*, float const*, float const*, ck_tile::ComposedAttention<0u, false> const*)",
        Bucket::Attention,
    );
    assert_bucket(
        "void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128, 128, 256, 3, false>(__hip_bfloat16*, float const*, float const*, __hip_bfloat16 const*, int const*, int const*, int, int, float const*)",
        Bucket::Attention,
    );
    assert_bucket("kernel_unified_attention_2d", Bucket::Attention);
    assert_bucket("kernel_unified_attention_3d", Bucket::Attention);
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: vLLM's 3D unified attention reduces its segments in `reduce_segments`; was other.
#[test]
fn vllm_unified_attention_reduction_is_attention() {
    assert_bucket("reduce_segments", Bucket::Attention);
}

/// traces/corpus/sglang_mi300x_qwen3_8b_prefilldecode.json.gz: mangled as the trace has it, and demangled.
#[test]
fn ck_tile_fmha_is_attention() {
    assert_bucket(
        "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVSAsyncINS_36BlockFmhaBatchPrefillPipelineProblemIDF16bDF16bDF16bffDF16bhfDF16bfDF16bNS_13TileFmhaShapeINS_8sequenceIJLi128ELi128ELi32ELi128ELi32ELi128EEEENS5_IJLi4ELi1ELi1EEEENS5_IJLi32ELi32ELi1",
        Bucket::Attention,
    );
    assert_bucket(
        "void ck_tile::kentry<2, ck_tile::FmhaBatchPrefillWithPagedKVCacheKernel<ck_tile::BlockFmhaBatchPrefillPipelineQRKSVSAsync<ck_tile::BlockFmhaBatchPrefillPipelineProblem<std::bfloat16_t, std::bfloat16_t, std::bfloat16_t, float, float, std::bfloat16_t, unsigned char, float, std::bfloat16_t, float, std:",
        Bucket::Attention,
    );
}

/// traces/corpus/hf_mi300x_qwen15_05b_chat.json.gz: 13% of kernel time, was other.
#[test]
fn rocm_triton_attn_fwd_is_attention() {
    assert_bucket("attn_fwd", Bucket::Attention);
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz: was other.
#[test]
fn sglang_store_kvcache_is_copy() {
    assert_bucket(
        "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)",
        Bucket::Copy,
    );
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz: mangled sgl_hip act_and_mul.
#[test]
fn sglang_activation_is_act_elementwise() {
    assert_bucket(
        "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
        Bucket::ActElementwise,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz and traces/corpus/hta_a100_train_nccl.json.gz.
#[test]
fn multimem_all_reduce_and_nccl_are_comm() {
    assert_bucket(
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
        Bucket::Comm,
    );
    assert_bucket(
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        Bucket::Comm,
    );
}

/// traces/corpus/hta_a100_train_nccl.json.gz and traces/corpus/hta_mi250_rocm62_train.json.gz: multi_tensor_apply inside Optimizer.step#SGD.step, were other.
#[test]
fn foreach_sgd_step_is_optimizer() {
    assert_bucket(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)",
        Bucket::Optimizer,
    );
}

/// PyTorch's fused Adam (aten/src/ATen/native/cuda/fused_adam_impl.cu) through multi_tensor_apply_for_fused_optimizer.
#[test]
fn fused_adam_is_optimizer() {
    assert_bucket(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)0, false>, double*, double, double, double, double, double, bool, float*, float*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)0, false>, double*, double, double, double, double, double, bool, float*, float*)",
        Bucket::Optimizer,
    );
}

/// traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz: a multi_tensor_apply that copies (torch._foreach_copy_), was other.
#[test]
fn foreach_copy_is_copy_not_optimizer() {
    assert_bucket(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<int, long, 2, 1, 1>, at::native::Copy<int, long> >(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<int, long, 2, 1, 1>, at::native::Copy<int, long>)",
        Bucket::Copy,
    );
}

/// traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz: an Inductor kernel that only casts (`_to_copy`), was act_elementwise.
#[test]
fn inductor_cast_only_kernel_is_copy() {
    assert_bucket("triton_poi_fused__to_copy_1", Bucket::Copy);
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: an Inductor kernel with arithmetic stays act_elementwise.
#[test]
fn inductor_kernels_that_compute_stay_elementwise() {
    assert_bucket(
        "triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0",
        Bucket::ActElementwise,
    );
}

/// traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz: was other.
#[test]
fn vllm_page_indices_copy_is_copy() {
    assert_bucket("_copy_page_indices_kernel", Bucket::Copy);
}

/// traces/corpus/kineto_v100_resnet50_oldschema.json.gz: cudnnScaleTensor, was other.
#[test]
fn cudnn_scale_tensor_is_act_elementwise() {
    assert_bucket(
        "void cudnn::ops::scalePackedTensor_kernel<float, float>(cudnnTensor4dStruct, float*, float)",
        Bucket::ActElementwise,
    );
}

/// torch `_grouped_mm` (HF transformers' `grouped_mm` experts) on Hopper: a CUTLASS grouped
/// GEMM over a `GroupProblemShape`, and its data preparation, from the Qwen3-Next-shaped
/// torch.profiler trace in traces/reference (hf-qwen3next-small-npl1); were gemm_dense.
#[test]
fn torch_grouped_mm_experts_are_moe() {
    assert_bucket(
        "void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple<int, int, int> >, cutlass::gemm::collective::CollectiveMma<> > > >(cutlass::gemm::kernel::GemmUniversal<>::Params)",
        Bucket::Moe,
    );
    assert_bucket(
        "void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t, cutlass::bfloat16_t, cutlass::bfloat16_t, float, cute::tuple<int, int, int>, cute::tuple<long, long, long> >(cutlass::bfloat16_t*)",
        Bucket::Moe,
    );
}

/// Issue 37: Inductor's embedding lookup fused into the first RMSNorm is a norm (its work is
/// the reduction over the hidden size); a plain embedding fusion stays a gather.
#[test]
fn inductor_embedding_fused_into_a_norm_is_norm_not_embed_gather() {
    assert_bucket(
        "triton_red_fused_embedding_mean_mul_pow_rsqrt_0",
        Bucket::Norm,
    );
    assert_bucket(
        "triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_1",
        Bucket::Norm,
    );
    assert_bucket("triton_per_fused_add_mean_mul_pow_rsqrt_3", Bucket::Norm);
    assert_bucket("triton_poi_fused_embedding_0", Bucket::EmbedGather);
}
