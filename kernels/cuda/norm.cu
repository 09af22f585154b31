// RMSNorm over rows (attention and FFN norms, the final norm) and per-head RMSNorm of q and k
// (Qwen3's q_norm / k_norm).

// out[r, :] = bf16(x[r, :] * rsqrt(mean(x^2) + eps) * w); one block of RMS_THREADS per row.
extern "C" __global__ void __launch_bounds__(RMS_THREADS) rms_norm_f32(const float* __restrict__ x,
                                                                      const float* __restrict__ w,
                                                                      bf16_t* __restrict__ out, int n, float eps) {
    pdl_enter();
    const i64 row = blockIdx.x;
    rms_norm_row(x + row * n, w, out + row * n, n, eps);
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
