// Elementwise kernels for the paths whose GEMM has no fused epilogue (cuBLAS, prefill).

// h[i] = bf16(silu(gu[2i]) * gu[2i + 1]); gate and up rows are interleaved at load time.
extern "C" __global__ void swiglu_f32(const float* __restrict__ gu, bf16_t* __restrict__ h, i64 n) {
    pdl_enter();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        h[i] = f32_to_bf16(silu(gu[2 * i]) * gu[2 * i + 1]);
    }
}

// y[r, c] += b[c] for an [rows, cols] f32 matrix.
extern "C" __global__ void add_bias_f32(float* __restrict__ y, const float* __restrict__ b, int cols, i64 n) {
    pdl_enter();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        y[i] += b[i % cols];
    }
}
