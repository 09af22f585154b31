// The `hf-bf16` numerics mode: the ops whose rounding differs from HF transformers' bf16
// eager forward, rewritten to round to bf16 exactly where torch does (every op's output, and
// inside RMSNorm, RoPE, SwiGLU and attention), so the engine's logits can be compared with HF's
// bit for bit rather than within a tolerance. Simple, unfused, and not tuned: the mode exists
// for correctness checks (`gapscope-engine logits --numerics hf-bf16`). Every product and sum
// is rounded on its own (no FMA contraction) except the dot products, which accumulate in f32
// as cuBLAS does.

__device__ __forceinline__ float bf16r(float x) { return bf16_to_f32(f32_to_bf16(x)); }

#define HF_THREADS 128
#define HF_ATT_MAX_CTX 8192

// Sum (or max) over the block; every thread gets the result.
__device__ __forceinline__ float hf_block_reduce(float v, bool is_max) {
    __shared__ float part[HF_THREADS / 32];
    __shared__ float result;
    v = is_max ? warp_max(v) : warp_sum(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < HF_THREADS / 32 ? part[lane] : (is_max ? -INFINITY : 0.0f);
        w = is_max ? warp_max(w) : warp_sum(w);
        if (lane == 0) result = w;
    }
    __syncthreads();
    const float r = result;
    __syncthreads();
    return r;
}

// torch's LlamaRMSNorm on a bf16 row: h = bf16(x * rsqrt(mean(x^2) + eps)); out = bf16(w * h).
__device__ __forceinline__ float hf_rms_scale(const float* x, int n, float eps) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += HF_THREADS) ss = fmaf(x[i], x[i], ss);
    ss = hf_block_reduce(ss, false);
    return rsqrtf(__fadd_rn(__fdiv_rn(ss, (float)n), eps));
}

// out[r, :] (bf16) = the HF RMSNorm of x[r, :]; one block per row.
extern "C" __global__ void __launch_bounds__(HF_THREADS) rms_norm_hf(const float* __restrict__ x,
                                                                     const float* __restrict__ w,
                                                                     bf16_t* __restrict__ out, int n, float eps) {
    pdl_enter();
    const float* xr = x + (i64)blockIdx.x * n;
    const float scale = hf_rms_scale(xr, n, eps);
    for (int i = threadIdx.x; i < n; i += HF_THREADS) {
        out[(i64)blockIdx.x * n + i] = f32_to_bf16(__fmul_rn(w[i], bf16r(__fmul_rn(xr[i], scale))));
    }
}

// Qwen3's q_norm / k_norm in place on the fused qkv rows (heads [0, nq) use qw, then kw), with
// the same two roundings; the result stays f32 holding bf16 values. blockIdx = (row, head);
// the arguments are head_rms_norm_f32's (nkv is implied by the grid).
extern "C" __global__ void __launch_bounds__(HF_THREADS) head_rms_norm_hf(float* __restrict__ qkv,
                                                                          const float* __restrict__ qw,
                                                                          const float* __restrict__ kw, int nq,
                                                                          int nkv, int hd, int row_stride, float eps) {
    pdl_enter();
    const int head = blockIdx.y;
    float* v = qkv + (i64)blockIdx.x * row_stride + (i64)head * hd;
    const float* w = head < nq ? qw : kw;
    const float scale = hf_rms_scale(v, hd, eps);
    for (int i = threadIdx.x; i < hd; i += HF_THREADS) v[i] = bf16r(__fmul_rn(w[i], bf16r(__fmul_rn(v[i], scale))));
}

// HF's apply_rotary_pos_emb in bf16: cos and sin of the f32 angle rounded to bf16, then
// q * cos + rotate_half(q) * sin with each product and the sum rounded. q is rotated in place;
// k is rotated into the cache; v is copied (both already bf16 values). Same arguments and
// layout as rope_kv_append_f32 (the first `rot` dimensions of a head rotate); blockIdx.x = row.
extern "C" __global__ void __launch_bounds__(HF_THREADS) rope_kv_append_hf(
    float* __restrict__ qkv, const int* __restrict__ pos, const int* __restrict__ slots,
    const float* __restrict__ inv_freq, bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache, int nq, int nkv,
    int hd, int row_stride, int rot) {
    pdl_enter();
    const i64 row = blockIdx.x;
    const int p = pos[row];
    const i64 slot = slots[row];
    float* q = qkv + row * row_stride;
    float* k = q + (i64)nq * hd;
    const float* v = k + (i64)nkv * hd;
    const int half = rot >> 1;
    for (int idx = threadIdx.x; idx < (nq + nkv) * half; idx += HF_THREADS) {
        const int h = idx / half, i = idx - h * half;
        float s, c;
        sincosf(__fmul_rn((float)p, inv_freq[i]), &s, &c);
        s = bf16r(s);
        c = bf16r(c);
        float* x = q + (i64)h * hd;  // q heads, then the k heads right after them
        const float x0 = x[i], x1 = x[i + half];
        const float lo = bf16r(__fsub_rn(bf16r(__fmul_rn(x0, c)), bf16r(__fmul_rn(x1, s))));
        const float hi = bf16r(__fadd_rn(bf16r(__fmul_rn(x1, c)), bf16r(__fmul_rn(x0, s))));
        if (h < nq) {
            x[i] = lo;
            x[i + half] = hi;
        } else {
            bf16_t* kc = k_cache + slot * nkv * hd + (i64)(h - nq) * hd;
            kc[i] = f32_to_bf16(lo);
            kc[i + half] = f32_to_bf16(hi);
        }
    }
    const int pass = hd - rot;
    for (int idx = threadIdx.x; idx < nkv * pass; idx += HF_THREADS) {
        const int h = idx / pass, i = rot + idx - h * pass;
        k_cache[slot * nkv * hd + (i64)h * hd + i] = f32_to_bf16(k[(i64)h * hd + i]);
    }
    bf16_t* vc = v_cache + slot * nkv * hd;
    for (int idx = threadIdx.x; idx < nkv * hd; idx += HF_THREADS) vc[idx] = f32_to_bf16(v[idx]);
}

// HF eager attention of one (query head, row): scores = bf16(bf16(q . k) * scale); probs =
// bf16(softmax_f32(scores)); out = bf16(probs . v). The row attends to positions [0, pos] of its
// sequence through the block table (a contiguous cache passes its gathered copy and an
// identity table). Context up to HF_ATT_MAX_CTX (checked by the caller). grid = (nq, rows).
extern "C" __global__ void __launch_bounds__(HF_THREADS) attn_hf_bf16(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ block_table, int max_blocks, int block_size,
    const int* __restrict__ row_seq, const int* __restrict__ row_pos, bf16_t* __restrict__ out, int nq, int nkv,
    int hd, float scale) {
    __shared__ float probs[HF_ATT_MAX_CTX];
    __shared__ float qs[256];
    pdl_enter();
    const int qh = blockIdx.x, row = blockIdx.y;
    const int seq = row_seq[row];
    const int len = min(row_pos[row] + 1, HF_ATT_MAX_CTX);
    const int kvh = qh / (nq / nkv);
    const i64 kv_row = (i64)nkv * hd;
    const int* table = block_table + (i64)seq * max_blocks;
    for (int d = threadIdx.x; d < hd; d += HF_THREADS) qs[d] = qkv[(i64)row * q_stride + (i64)qh * hd + d];
    __syncthreads();
    float m = -INFINITY;
    for (int p = threadIdx.x; p < len; p += HF_THREADS) {
        const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
        const bf16_t* kr = k_cache + slot * kv_row + (i64)kvh * hd;
        float acc = 0.0f;
        for (int d = 0; d < hd; ++d) acc = fmaf(qs[d], bf16_to_f32(kr[d]), acc);
        const float s = bf16r(__fmul_rn(bf16r(acc), scale));
        probs[p] = s;
        m = fmaxf(m, s);
    }
    m = hf_block_reduce(m, true);
    float sum = 0.0f;
    for (int p = threadIdx.x; p < len; p += HF_THREADS) {
        const float e = expf(__fsub_rn(probs[p], m));
        probs[p] = e;
        sum = __fadd_rn(sum, e);
    }
    sum = hf_block_reduce(sum, false);
    for (int p = threadIdx.x; p < len; p += HF_THREADS) probs[p] = bf16r(__fdiv_rn(probs[p], sum));
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += HF_THREADS) {
        float acc = 0.0f;
        for (int p = 0; p < len; ++p) {
            const i64 slot = (i64)table[p / block_size] * block_size + p % block_size;
            acc = fmaf(probs[p], bf16_to_f32(v_cache[slot * kv_row + (i64)kvh * hd + d]), acc);
        }
        out[((i64)row * nq + qh) * hd + d] = f32_to_bf16(acc);
    }
}

// The roundings HF applies after a linear, on its result: `acc16` (bf16, as cuBLAS writes it for
// torch) or else `acc32` (f32, bias already added; rounded here).
//   mode 0 (store)       y[i] = bf16(acc[i])                         (acc32 may be y)
//   mode 1 (accumulate)  y[i] = bf16(y[i] + bf16(acc[i]))            (the residual add)
//   mode 2 (swiglu)      yh[i] = bf16(bf16(silu(bf16(g))) * bf16(u)), g, u = acc[2i], acc[2i+1]
// n = outputs (rows * width, halved for swiglu).
__device__ __forceinline__ float hf_acc(const float* acc32, const bf16_t* acc16, i64 i) {
    return acc16 ? bf16_to_f32(acc16[i]) : bf16r(acc32[i]);
}
extern "C" __global__ void hf_linear_epilogue(const float* acc32, const bf16_t* acc16, float* y,
                                              bf16_t* __restrict__ yh, i64 n, int mode) {
    pdl_enter();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        if (mode == OUT_SWIGLU) {
            const float g = hf_acc(acc32, acc16, 2 * i), u = hf_acc(acc32, acc16, 2 * i + 1);
            yh[i] = f32_to_bf16(__fmul_rn(bf16r(silu(g)), u));
        } else if (mode == OUT_ACCUMULATE) {
            y[i] = bf16r(__fadd_rn(y[i], hf_acc(acc32, acc16, i)));
        } else {
            y[i] = hf_acc(acc32, acc16, i);
        }
    }
}
