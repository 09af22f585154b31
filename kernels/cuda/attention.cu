// Decode / causal-prefill attention over a bf16 KV cache addressed through a block table
// (split-K flash-decoding with GQA). Every query row carries its sequence and position; the row
// attends to positions [0, pos]. A paged cache passes its block table; a contiguous cache that
// was gathered per sequence passes an identity table over the gathered buffer.
//
// grid = (n_kv_heads, rows, splits), block = 128. One block handles the G = nq / nkv query
// heads that share one KV head, over positions [split * chunk, (split + 1) * chunk).
// With splits == 1 the block writes the normalised bf16 output; otherwise it writes partial
// (acc, max, sum) for attn_reduce_f32.

#define ATT_THREADS 128
#define ATT_TILE 64
#define ATT_MAX_G 8
#define ATT_MAX_HD 256
#define ATT_PER_THREAD (ATT_MAX_G * ATT_MAX_HD / ATT_THREADS)

extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_decode_bf16(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ block_table, int max_blocks, int block_size,
    const int* __restrict__ row_seq, const int* __restrict__ row_pos, bf16_t* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, int nq, int nkv, int hd, int chunk, float scale) {
    __shared__ float q_s[ATT_MAX_G * ATT_MAX_HD];
    __shared__ float s_s[ATT_MAX_G][ATT_TILE];
    __shared__ int slot_s[ATT_TILE];
    __shared__ float m_s[ATT_MAX_G], l_s[ATT_MAX_G], alpha_s[ATT_MAX_G];

    const int kvh = blockIdx.x, row = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int G = nq / nkv;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int seq = row_seq[row];
    const int len = row_pos[row] + 1;
    const int start = split * chunk;
    const int end = min(len, start + chunk);
    const int* table = block_table + (i64)seq * max_blocks;
    const i64 kv_row = (i64)nkv * hd;

    for (int i = tid; i < G * hd; i += ATT_THREADS) {
        q_s[i] = qkv[(i64)row * q_stride + (i64)kvh * G * hd + i];
    }
    if (tid < G) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.0f;
    }
    float acc[ATT_PER_THREAD];
    // This thread's (head, dim) per output slot, computed once (no divisions in the loops).
    int hh[ATT_PER_THREAD], dd[ATT_PER_THREAD];
#pragma unroll
    for (int i = 0; i < ATT_PER_THREAD; ++i) {
        acc[i] = 0.0f;
        const int idx = tid + i * ATT_THREADS;
        hh[i] = idx < G * hd ? idx / hd : -1;
        dd[i] = idx < G * hd ? idx - (idx / hd) * hd : 0;
    }
    __syncthreads();

    for (int t0 = start; t0 < end; t0 += ATT_TILE) {
        const int n = min(ATT_TILE, end - t0);
        // Scores: each warp takes 4 consecutive keys at a time (all their loads in flight),
        // lanes split the head dimension.
        for (int kb = warp * 4; kb < n; kb += 4 * (ATT_THREADS / 32)) {
            float kv[4][ATT_MAX_HD / 32];
            int slot[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int p = t0 + kb + u;
                const bool ok = kb + u < n;
                slot[u] = ok ? table[p / block_size] * block_size + p % block_size : 0;
                const bf16_t* kr = k_cache + (i64)slot[u] * kv_row + (i64)kvh * hd;
#pragma unroll
                for (int e = 0; e < ATT_MAX_HD / 32; ++e) {
                    const int d = lane + 32 * e;
                    kv[u][e] = (ok && d < hd) ? bf16_to_f32(kr[d]) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                if (kb + u >= n) break;
                for (int h = 0; h < G; ++h) {
                    float dot = 0.0f;
#pragma unroll
                    for (int e = 0; e < ATT_MAX_HD / 32; ++e) {
                        const int d = lane + 32 * e;
                        if (d < hd) dot = fmaf(q_s[h * hd + d], kv[u][e], dot);
                    }
                    dot = warp_sum(dot);
                    if (lane == 0) s_s[h][kb + u] = dot * scale;
                }
                if (lane == 0) slot_s[kb + u] = slot[u];
            }
        }
        __syncthreads();
        // Online softmax update, one warp per head.
        for (int h = warp; h < G; h += ATT_THREADS / 32) {
            float mx = -INFINITY;
            for (int kk = lane; kk < n; kk += 32) mx = fmaxf(mx, s_s[h][kk]);
            mx = warp_max(mx);
            const float m_old = m_s[h];
            const float m_new = fmaxf(m_old, mx);
            float sum = 0.0f;
            for (int kk = lane; kk < n; kk += 32) {
                const float pv = expf(s_s[h][kk] - m_new);
                s_s[h][kk] = pv;
                sum += pv;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float alpha = expf(m_old - m_new);
                alpha_s[h] = alpha;
                l_s[h] = l_s[h] * alpha + sum;
                m_s[h] = m_new;
            }
        }
        __syncthreads();
        // acc[h][d] = acc * alpha + sum_k p[h][k] * v[k][d]; four keys' V loads in flight.
#pragma unroll
        for (int i = 0; i < ATT_PER_THREAD; ++i) {
            if (hh[i] >= 0) acc[i] *= alpha_s[hh[i]];
        }
        for (int kk = 0; kk < n; kk += 4) {
            float vv[4][ATT_PER_THREAD];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const bool ok = kk + u < n;
                const bf16_t* vr = v_cache + (i64)(ok ? slot_s[kk + u] : 0) * kv_row + (i64)kvh * hd;
#pragma unroll
                for (int i = 0; i < ATT_PER_THREAD; ++i) {
                    vv[u][i] = (ok && hh[i] >= 0) ? bf16_to_f32(vr[dd[i]]) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                if (kk + u >= n) break;
#pragma unroll
                for (int i = 0; i < ATT_PER_THREAD; ++i) {
                    if (hh[i] >= 0) acc[i] = fmaf(s_s[hh[i]][kk + u], vv[u][i], acc[i]);
                }
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < ATT_PER_THREAD; ++i) {
        const int idx = tid + i * ATT_THREADS;
        if (idx < G * hd) {
            const int h = idx / hd, d = idx - h * hd;
            const int qh = kvh * G + h;
            if (splits == 1) {
                out[(i64)row * nq * hd + (i64)qh * hd + d] = f32_to_bf16(acc[i] / l_s[h]);
            } else {
                part_acc[(((i64)row * nq + qh) * splits + split) * hd + d] = acc[i];
            }
        }
    }
    if (splits > 1 && tid < G) {
        const int qh = kvh * G + tid;
        const i64 base = (((i64)row * nq + qh) * splits + split) * 2;
        part_ml[base] = m_s[tid];
        part_ml[base + 1] = l_s[tid];
    }
}

// Combine split partials: grid = rows * nq, block = hd threads.
extern "C" __global__ void attn_reduce_f32(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                           bf16_t* __restrict__ out, int splits, int hd) {
    const i64 rh = blockIdx.x;
    const int d = threadIdx.x;
    float M = -INFINITY;
    for (int s = 0; s < splits; ++s) M = fmaxf(M, part_ml[(rh * splits + s) * 2]);
    float L = 0.0f, a = 0.0f;
    for (int s = 0; s < splits; ++s) {
        const float m = part_ml[(rh * splits + s) * 2];
        if (m == -INFINITY) continue;
        const float w = expf(m - M);
        L += w * part_ml[(rh * splits + s) * 2 + 1];
        a += w * part_acc[(rh * splits + s) * hd + d];
    }
    out[rh * hd + d] = f32_to_bf16(a / L);
}
