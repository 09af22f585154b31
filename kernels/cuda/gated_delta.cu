// Gated DeltaNet decode (the linear-attention layers of Qwen3-Next / Qwen3.5): the causal
// conv1d step, the gated delta rule recurrence over each sequence's state, the gated output
// norm, the state gather of the campaigns' slow path, and the sigmoid gate of the hybrid
// full-attention layers. CPU definitions: engine/src/cpu/gated_delta.rs and cpu/hybrid.rs.
//
// Rows come in groups, one per sequence, its rows contiguous and in order (a prefill's prompt,
// or a decode step's single row): rows [group_start[g], group_start[g + 1]) of sequence
// group_seq[g]. A group whose first row is at position 0 starts from a zero state.
// `mixed` rows: [q (kh * dk) | k (kh * dk) | v (vh * dv) | z (vh * dv) | b (vh) | a (vh)].

// The causal conv1d with SiLU over the conv channels of `mixed`, in place; conv_state is
// [seq, channels, K - 1] (oldest first). grid = (channel blocks of 128, groups); K <= 8.
extern "C" __global__ void __launch_bounds__(128) conv_step_f32(
    float* __restrict__ mixed, int stride, const float* __restrict__ w, float* __restrict__ conv_state,
    const int* __restrict__ group_start, const int* __restrict__ group_seq, const int* __restrict__ row_pos,
    int channels, int taps) {
    pdl_enter();
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= channels) return;
    const int g = blockIdx.y;
    const int r0 = group_start[g], r1 = group_start[g + 1];
    const int keep = taps - 1;
    float* st = conv_state + ((i64)group_seq[g] * channels + c) * keep;
    const bool fresh = row_pos[r0] == 0;
    float hist[8], wt[8];
#pragma unroll
    for (int t = 0; t < 8; ++t) {
        hist[t] = (t < keep && !fresh) ? st[t] : 0.0f;
        wt[t] = t < taps ? w[(i64)c * taps + t] : 0.0f;
    }
    for (int r = r0; r < r1; ++r) {
        float* xp = mixed + (i64)r * stride + c;
        const float x = *xp;
        float acc = 0.0f;
#pragma unroll
        for (int t = 0; t < 8; ++t)
            if (t < keep) acc += hist[t] * wt[t];
        acc += x * wt[keep];
        *xp = silu(acc);
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            if (t + 1 < keep) hist[t] = hist[t + 1];
            else if (t + 1 == keep) hist[t] = x;
        }
    }
#pragma unroll
    for (int t = 0; t < 8; ++t)
        if (t < keep) st[t] = hist[t];
}

// The gated delta rule. grid = (value heads, groups), a thread per state column (blockDim =
// dv <= 256); each thread keeps its column of S (DK values) in registers across the group's
// rows.
// State slots: [slot, vh, DK, dv] f32. Reads slot in_ids[g] of state_in (g without ids: the
// gathered scratch), writes slot out_ids[g] of state_out (g without ids: scratch for the
// copy-back). Per row: q, k L2-normalised (q also by 1/sqrt(DK)), g = -exp(A_log) *
// softplus(a + dt_bias), beta = sigmoid(b); S *= exp(g); S += k (beta (v - S^T k))^T;
// core = S^T q.
template <int DK>
__device__ __forceinline__ void delta_rule(
    const float* __restrict__ mixed, int stride, const float* __restrict__ a_log,
    const float* __restrict__ dt_bias, const float* state_in, const int* __restrict__ in_ids,
    float* state_out, const int* __restrict__ out_ids, const int* __restrict__ group_start,
    const int* __restrict__ row_pos, float* __restrict__ core, int kh, int vh, float eps) {
    __shared__ float qs[DK], ks[DK];
    const int dv = blockDim.x, j = threadIdx.x;
    const int h = blockIdx.x, g = blockIdx.y;
    const int kg = h / (vh / kh);
    const i64 kd = (i64)kh * DK, vd = (i64)vh * dv;
    const int r0 = group_start[g], r1 = group_start[g + 1];
    const i64 in_slot = in_ids ? in_ids[g] : g, out_slot = out_ids ? out_ids[g] : g;
    const float* sin = state_in + (in_slot * vh + h) * DK * dv;
    float* sout = state_out + (out_slot * vh + h) * DK * dv;
    const bool fresh = row_pos[r0] == 0;
    float s[DK];
#pragma unroll
    for (int i = 0; i < DK; ++i) s[i] = fresh ? 0.0f : sin[(i64)i * dv + j];
    const float scale = 1.0f / sqrtf((float)DK);
    const float decay_rate = expf(a_log[h]);
    for (int r = r0; r < r1; ++r) {
        const float* row = mixed + (i64)r * stride;
        __syncthreads();
        for (int i = j; i < DK; i += dv) {
            qs[i] = row[(i64)kg * DK + i];
            ks[i] = row[kd + (i64)kg * DK + i];
        }
        __syncthreads();
        float qq = 0.0f, kk = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; ++i) {
            qq += qs[i] * qs[i];
            kk += ks[i] * ks[i];
        }
        const float qn = 1.0f / sqrtf(qq + eps), kn = 1.0f / sqrtf(kk + eps);
        asm volatile("" ::: "memory");
        const float v = row[2 * kd + (i64)h * dv + j];
        const float b = row[2 * kd + 2 * vd + h], a = row[2 * kd + 2 * vd + vh + h];
        const float x = a + dt_bias[h];
        const float sp = x > 20.0f ? x : log1pf(expf(x));
        const float decay = expf(-decay_rate * sp);
        const float beta = 1.0f / (1.0f + expf(-b));
        float d = v;
#pragma unroll
        for (int i = 0; i < DK; ++i) {
            s[i] *= decay;
            d -= s[i] * (ks[i] * kn);
        }
        d *= beta;
        // Re-read k and q from shared memory below instead of holding them in registers
        // beside the state column (which would not fit at DK = 128).
        asm volatile("" ::: "memory");
        float o = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; ++i) {
            s[i] += (ks[i] * kn) * d;
            o += s[i] * (qs[i] * qn * scale);
        }
        core[(i64)r * vd + (i64)h * dv + j] = o;
    }
#pragma unroll
    for (int i = 0; i < DK; ++i) sout[(i64)i * dv + j] = s[i];
}

#define DELTA_RULE_ENTRY(NAME, DK)                                                                        \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                              \
        const float* __restrict__ mixed, int stride, const float* __restrict__ a_log,                     \
        const float* __restrict__ dt_bias, const float* state_in, const int* __restrict__ in_ids,         \
        float* state_out, const int* __restrict__ out_ids, const int* __restrict__ group_start,           \
        const int* __restrict__ row_pos, float* __restrict__ core, int kh, int vh, float eps) {           \
        pdl_enter();                                                                                      \
        delta_rule<DK>(mixed, stride, a_log, dt_bias, state_in, in_ids, state_out, out_ids, group_start, \
                       row_pos, core, kh, vh, eps);                                                       \
    }
DELTA_RULE_ENTRY(delta_rule_dk32_f32, 32)
DELTA_RULE_ENTRY(delta_rule_dk64_f32, 64)
DELTA_RULE_ENTRY(delta_rule_dk128_f32, 128)

// out[r, h, :] = bf16(rms_norm(core[r, h, :]) * w * silu(z[r, h, :])), z in the mixed rows at
// z_at. blockIdx = (row, value head); one warp per head; dv <= 256.
extern "C" __global__ void gated_norm_f32(const float* __restrict__ core, const float* __restrict__ mixed,
                                          int stride, int z_at, const float* __restrict__ w,
                                          bf16_t* __restrict__ out, int vh, int dv, float eps) {
    pdl_enter();
    const i64 r = blockIdx.x;
    const int h = blockIdx.y, lane = threadIdx.x;
    const float* x = core + (r * vh + h) * dv;
    const float* z = mixed + r * stride + z_at + (i64)h * dv;
    bf16_t* o = out + (r * vh + h) * dv;
    float vals[8];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        vals[e] = i < dv ? x[i] : 0.0f;
        ss += vals[e] * vals[e];
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)dv + eps);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        if (i < dv) o[i] = f32_to_bf16(vals[e] * inv * w[i] * silu(z[i]));
    }
}

// dst[g, :] = src[ids[g], :] for rows of `vecs` 16-byte vectors (the recurrent state gather);
// grid = (vector blocks, groups).
extern "C" __global__ void state_gather_f32(const uint4* __restrict__ src, const int* __restrict__ ids,
                                           uint4* __restrict__ dst, i64 vecs) {
    pdl_enter();
    const i64 g = blockIdx.y;
    const uint4* s = src + (i64)ids[g] * vecs;
    uint4* d = dst + g * vecs;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < vecs; i += (i64)gridDim.x * blockDim.x)
        d[i] = s[i];
}

// attn[i] = bf16(attn[i] * sigmoid(gate[i])) for the [rows, q_dim] attention output.
extern "C" __global__ void sigmoid_gate_bf16(bf16_t* __restrict__ attn, const float* __restrict__ gate, i64 n) {
    pdl_enter();
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        attn[i] = f32_to_bf16(bf16_to_f32(attn[i]) * (1.0f / (1.0f + expf(-gate[i]))));
}
