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
#define ATT_MAX_HD 256
#define ATT_E (ATT_MAX_HD / 32)
#define ATT_U 4

// One warp per (row, query head, split): q in registers (lane holds dims lane + 32e), keys
// ATT_U at a time with all their K and V loads in flight, online softmax in registers. No
// block-level synchronisation; query heads sharing a KV head read the same rows through L1/L2.
// grid = (ceil(nq / ATT_WARPS), rows, splits), block = ATT_THREADS.
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_decode_bf16(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ block_table, int max_blocks, int block_size,
    const int* __restrict__ row_seq, const int* __restrict__ row_pos, bf16_t* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, int* __restrict__ counters, int nq, int nkv,
    int hd, int chunk, float scale) {
    const int lane = threadIdx.x & 31;
    const int qh_raw = blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    const bool active = qh_raw < nq;  // no early return: the split reduction below synchronises
    const int qh = active ? qh_raw : nq - 1;
    const int row = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int kvh = qh / (nq / nkv);
    const int seq = row_seq[row];
    const int len = row_pos[row] + 1;
    const int start = split * chunk;
    const int end = active ? min(len, start + chunk) : start;
    const int* table = block_table + (i64)seq * max_blocks;
    const i64 kv_row = (i64)nkv * hd;
    const i64 head_off = (i64)kvh * hd;

    float q[ATT_E], acc[ATT_E];
#pragma unroll
    for (int e = 0; e < ATT_E; ++e) {
        const int d = lane + 32 * e;
        q[e] = d < hd ? qkv[(i64)row * q_stride + (i64)qh * hd + d] * scale : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int p0 = start; p0 < end; p0 += ATT_U) {
        float kk[ATT_U][ATT_E], vv[ATT_U][ATT_E];
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            const int p = p0 + u;
            const bool ok = p < end;
            const i64 slot = ok ? (i64)table[p / block_size] * block_size + p % block_size : 0;
            const bf16_t* kr = k_cache + slot * kv_row + head_off;
            const bf16_t* vr = v_cache + slot * kv_row + head_off;
#pragma unroll
            for (int e = 0; e < ATT_E; ++e) {
                const int d = lane + 32 * e;
                const bool in = ok && d < hd;
                kk[u][e] = in ? bf16_to_f32(kr[d]) : 0.0f;
                vv[u][e] = in ? bf16_to_f32(vr[d]) : 0.0f;
            }
        }
        float sc[ATT_U];
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < ATT_E; ++e) dot = fmaf(q[e], kk[u][e], dot);
            dot = warp_sum(dot);
            sc[u] = p0 + u < end ? dot : -INFINITY;
        }
        float mx = m;
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) mx = fmaxf(mx, sc[u]);
        const float alpha = expf(m - mx);
        l *= alpha;
#pragma unroll
        for (int e = 0; e < ATT_E; ++e) acc[e] *= alpha;
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            const float pu = expf(sc[u] - mx);
            l += pu;
#pragma unroll
            for (int e = 0; e < ATT_E; ++e) acc[e] = fmaf(pu, vv[u][e], acc[e]);
        }
        m = mx;
    }
    if (splits == 1) {
#pragma unroll
        for (int e = 0; e < ATT_E; ++e) {
            const int d = lane + 32 * e;
            if (active && d < hd) out[(i64)row * nq * hd + (i64)qh * hd + d] = f32_to_bf16(acc[e] / l);
        }
        return;
    }
    const i64 base = ((i64)row * nq + qh) * splits + split;
    if (active) {
#pragma unroll
        for (int e = 0; e < ATT_E; ++e) {
            const int d = lane + 32 * e;
            if (d < hd) part_acc[base * hd + d] = acc[e];
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
    float M = -INFINITY;
    for (int sp = 0; sp < splits; ++sp) M = fmaxf(M, __ldcg(part_ml + (hbase + sp) * 2));
    float L = 0.0f, o[ATT_E];
#pragma unroll
    for (int e = 0; e < ATT_E; ++e) o[e] = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
        const float ms = __ldcg(part_ml + (hbase + sp) * 2);
        if (ms == -INFINITY) continue;
        const float w = expf(ms - M);
        L += w * __ldcg(part_ml + (hbase + sp) * 2 + 1);
#pragma unroll
        for (int e = 0; e < ATT_E; ++e) {
            const int d = lane + 32 * e;
            if (d < hd) o[e] += w * __ldcg(part_acc + (hbase + sp) * hd + d);
        }
    }
#pragma unroll
    for (int e = 0; e < ATT_E; ++e) {
        const int d = lane + 32 * e;
        if (d < hd) out[(i64)row * nq * hd + (i64)qh * hd + d] = f32_to_bf16(o[e] / L);
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
