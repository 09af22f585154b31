// RMSNorm over rows (attention and FFN norms, the final norm) and per-head RMSNorm of q and k
// (Qwen3's q_norm / k_norm).

// out[r, :] = bf16(x[r, :] * rsqrt(mean(x^2) + eps) * w); one block per row.
extern "C" __global__ void rms_norm_f32(const float* __restrict__ x, const float* __restrict__ w,
                                       bf16_t* __restrict__ out, int n, float eps) {
    pdl_enter();
    __shared__ float partial[32];
    const i64 row = blockIdx.x;
    const float* xr = x + row * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        float v = lane < nw ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partial[0] = v;
    }
    __syncthreads();
    const float scale = rsqrtf(partial[0] / (float)n + eps);
    bf16_t* o = out + row * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = f32_to_bf16(xr[i] * scale * w[i]);
}

// In place on the fused qkv rows: heads [0, nq) use qw, heads [nq, nq + nkv) use kw.
// blockIdx = (row, head); one warp per head; hd <= 256.
extern "C" __global__ void head_rms_norm_f32(float* __restrict__ qkv, const float* __restrict__ qw,
                                            const float* __restrict__ kw, int nq, int nkv, int hd,
                                            int row_stride, float eps) {
    pdl_enter();
    const int head = blockIdx.y;
    float* v = qkv + (i64)blockIdx.x * row_stride + (i64)head * hd;
    const float* w = head < nq ? qw : kw;
    const int lane = threadIdx.x;
    float vals[8];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        vals[e] = i < hd ? v[i] : 0.0f;
        ss += vals[e] * vals[e];
    }
    ss = warp_sum(ss);
    const float scale = rsqrtf(ss / (float)hd + eps);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        if (i < hd) v[i] = vals[e] * scale * w[i];
    }
}
