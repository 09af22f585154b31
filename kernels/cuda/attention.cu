// Decode / causal-prefill attention over a bf16 KV cache addressed through a block table
// (split-K flash-decoding with GQA). Every query row carries its sequence and position; the row
// attends to positions [0, pos]. A paged cache passes its block table; a contiguous cache that
// was gathered per sequence passes an identity table over the gathered buffer.
//
// Each split covers positions [split * chunk, (split + 1) * chunk). With splits == 1 the kernel
// writes the normalised bf16 output; otherwise partial (acc, max, sum), which the last split
// block combines when `counters` is given, or attn_reduce_f32 otherwise.

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_U 8
#define ATT_MAX_TABLE 1024

// Loads EPL consecutive bf16 values (EPL = 2, 4 or 8: one 4-, 8- or 16-byte load).
template <int EPL>
__device__ __forceinline__ void load_bf16(const bf16_t* p, float v[EPL]) {
    if (EPL == 8) {
        const uint4 w = *reinterpret_cast<const uint4*>(p);
        v[0] = bf16_lo(w.x); v[1] = bf16_hi(w.x); v[2] = bf16_lo(w.y); v[3] = bf16_hi(w.y);
        v[4] = bf16_lo(w.z); v[5] = bf16_hi(w.z); v[6] = bf16_lo(w.w); v[7] = bf16_hi(w.w);
    } else if (EPL == 4) {
        const uint2 w = *reinterpret_cast<const uint2*>(p);
        v[0] = bf16_lo(w.x); v[1] = bf16_hi(w.x); v[2] = bf16_lo(w.y); v[3] = bf16_hi(w.y);
    } else {
        const unsigned int w = *reinterpret_cast<const unsigned int*>(p);
        v[0] = bf16_lo(w); v[1] = bf16_hi(w);
    }
}

// One warp per (row, query head, split). Lane l holds head dims [l * EPL, (l + 1) * EPL) of q
// (pre-scaled) and of the output accumulator; keys are taken ATT_U at a time with all their K
// and V loads in flight; the row's block table sits in shared memory, so no key waits on a
// dependent global load. Query heads of one block share a KV head (GQA) and so its rows in L1.
template <int EPL>
__device__ __forceinline__ void attn_impl(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ table_s, int block_size, int row, int qh,
    bool active, int len, int start, int end, int nq, int nkv, int hd, float scale, float acc[EPL], float& m_out,
    float& l_out) {
    const int lane = threadIdx.x & 31;
    const int kvh = qh / (nq / nkv);
    const i64 kv_row = (i64)nkv * hd;
    const i64 head_off = (i64)kvh * hd + lane * EPL;
    float q[EPL];
#pragma unroll
    for (int e = 0; e < EPL; ++e) {
        q[e] = active ? qkv[(i64)row * q_stride + (i64)qh * hd + lane * EPL + e] * scale : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int p0 = start; p0 < end; p0 += ATT_U) {
        float kk[ATT_U][EPL], vv[ATT_U][EPL];
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            const int p = min(p0 + u, end - 1);
            const i64 slot = (i64)table_s[p / block_size] * block_size + p % block_size;
            load_bf16<EPL>(k_cache + slot * kv_row + head_off, kk[u]);
            load_bf16<EPL>(v_cache + slot * kv_row + head_off, vv[u]);
        }
        float sc[ATT_U];
        float mx = m;
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < EPL; ++e) dot = fmaf(q[e], kk[u][e], dot);
            dot = warp_sum(dot);
            sc[u] = p0 + u < end ? dot : -INFINITY;
            mx = fmaxf(mx, sc[u]);
        }
        const float alpha = expf(m - mx);
        l *= alpha;
#pragma unroll
        for (int e = 0; e < EPL; ++e) acc[e] *= alpha;
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            const float pu = expf(sc[u] - mx);
            l += pu;
#pragma unroll
            for (int e = 0; e < EPL; ++e) acc[e] = fmaf(pu, vv[u][e], acc[e]);
        }
        m = mx;
    }
    m_out = m;
    l_out = l;
}

// grid = (ceil(nq / ATT_WARPS), rows, splits), block = ATT_THREADS; hd in {64, 128, 256}.
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_decode_bf16(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ block_table, int max_blocks, int block_size,
    const int* __restrict__ row_seq, const int* __restrict__ row_pos, bf16_t* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, int* __restrict__ counters, int nq, int nkv,
    int hd, int chunk, float scale) {
    pdl_enter();
    __shared__ int table_s[ATT_MAX_TABLE];
    const int lane = threadIdx.x & 31;
    const int qh_raw = blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    const bool active = qh_raw < nq;  // no early return: the split reduction below synchronises
    const int qh = active ? qh_raw : nq - 1;
    const int row = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int seq = row_seq[row];
    const int len = row_pos[row] + 1;
    const int start = split * chunk;
    const int end = active ? min(len, start + chunk) : start;
    const int nblk = min(max_blocks, ATT_MAX_TABLE);
    for (int i = threadIdx.x; i < nblk; i += ATT_THREADS) table_s[i] = block_table[(i64)seq * max_blocks + i];
    __syncthreads();
    const int EPL = hd >> 5;
    float acc[8];
    float m, l;
    if (EPL == 8) {
        attn_impl<8>(qkv, q_stride, k_cache, v_cache, table_s, block_size, row, qh, active, len, start, end, nq, nkv, hd, scale, acc, m, l);
    } else if (EPL == 4) {
        attn_impl<4>(qkv, q_stride, k_cache, v_cache, table_s, block_size, row, qh, active, len, start, end, nq, nkv, hd, scale, acc, m, l);
    } else {
        attn_impl<2>(qkv, q_stride, k_cache, v_cache, table_s, block_size, row, qh, active, len, start, end, nq, nkv, hd, scale, acc, m, l);
    }
    if (splits == 1) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (active && e < EPL) out[(i64)row * nq * hd + (i64)qh * hd + lane * EPL + e] = f32_to_bf16(acc[e] / l);
        }
        return;
    }
    const i64 base = ((i64)row * nq + qh) * splits + split;
    if (active) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (e < EPL) part_acc[base * hd + lane * EPL + e] = acc[e];
        }
        if (lane == 0) {
            part_ml[base * 2] = m;
            part_ml[base * 2 + 1] = l;
        }
    }
    if (counters == 0) return;  // attn_reduce_f32 combines the splits
    // The last split block to finish combines all splits of its heads (one launch, no
    // separate reduce kernel); it resets the counter for the next launch.
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int* c = counters + (i64)row * gridDim.x + blockIdx.x;
        const int ticket = atomicAdd(c, 1);
        is_last = ticket == splits - 1;
        if (is_last) *c = 0;
    }
    __syncthreads();
    if (!is_last || !active) return;
    __threadfence();
    const i64 hbase = ((i64)row * nq + qh) * splits;
    // Lane s < splits reads split s's (max, sum); the warp reduces them in registers.
    float M = -INFINITY;
    for (int sp = lane; sp < splits; sp += 32) M = fmaxf(M, __ldcg(part_ml + (hbase + sp) * 2));
    M = warp_max(M);
    float L = 0.0f;
    for (int sp = lane; sp < splits; sp += 32) {
        const float ms = __ldcg(part_ml + (hbase + sp) * 2);
        if (ms != -INFINITY) L += expf(ms - M) * __ldcg(part_ml + (hbase + sp) * 2 + 1);
    }
    L = warp_sum(L);
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = 0.0f;
    // Lane j computes split (sp0 + j)'s weight once; the splits are then summed in order with
    // several splits' partial loads in flight (same operations and order as one at a time).
    for (int sp0 = 0; sp0 < splits; sp0 += 32) {
        float w_lane = 0.0f;
        if (sp0 + lane < splits) {
            const float ms = __ldcg(part_ml + (hbase + sp0 + lane) * 2);
            w_lane = ms == -INFINITY ? 0.0f : expf(ms - M);
        }
        const int n = min(32, splits - sp0);
#pragma unroll 4
        for (int j = 0; j < n; ++j) {
            const float w = __shfl_sync(0xffffffffu, w_lane, j);
            const float* pa = part_acc + (hbase + sp0 + j) * hd + lane * EPL;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                if (e < EPL) o[e] += w * __ldcg(pa + e);
            }
        }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        if (e < EPL) out[(i64)row * nq * hd + (i64)qh * hd + lane * EPL + e] = f32_to_bf16(o[e] / L);
    }
}

// Combine split partials: grid = rows * nq, block = hd threads.
extern "C" __global__ void attn_reduce_f32(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                                           bf16_t* __restrict__ out, int splits, int hd) {
    pdl_enter();
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
