// Decode / causal-prefill attention over a bf16 KV cache addressed through a block table
// (split-K flash-decoding with GQA). Every query row carries its sequence and position; the row
// attends to positions [0, pos]. A paged cache passes its block table; a contiguous cache that
// was gathered per sequence passes an identity table over the gathered buffer.
//
// Each split covers positions [split * chunk, (split + 1) * chunk). With splits == 1 the kernel
// writes the normalised bf16 output; otherwise partial (acc, max, sum), which the last split
// block to finish combines (its ticket in `counters`).

#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_MAX_TABLE 1024
#define ATT_MAX_KW 8

// Loads EPL consecutive bf16 values (EPL = 2, 4 or 8: one 4-, 8- or 16-byte load) as EPL / 2
// packed words: keys stay packed in registers until they are used.
template <int EPL>
__device__ __forceinline__ void load_raw(const bf16_t* p, unsigned int w[EPL / 2]) {
    if (EPL == 8) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        w[0] = v.x; w[1] = v.y; w[2 % (EPL / 2)] = v.z; w[3 % (EPL / 2)] = v.w;
    } else if (EPL == 4) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        w[0] = v.x; w[1 % (EPL / 2)] = v.y;
    } else {
        w[0] = *reinterpret_cast<const unsigned int*>(p);
    }
}

__device__ __forceinline__ unsigned int pack_bf16(float lo, float hi) {
    return (unsigned int)f32_to_bf16(lo) | ((unsigned int)f32_to_bf16(hi) << 16);
}

// One warp per (row, query head, split, key lane). Lane l holds head dims [l * EPL, (l + 1) * EPL)
// of q (pre-scaled) and of the output accumulator; the warp takes keys ATT_U at a time with all
// their K and V loads in flight (16, or 8 where registers are short: hd 256 and the key-lane
// kernels), key groups start + (kw + KW * j) * ATT_U for j = 0, 1, ...; the
// row's block table sits in shared memory, so no key waits on a dependent global load. Query
// heads of one block share a KV head (GQA) and so its rows in L1.
//
// With `rope` the step's RoPE and KV append are fused in (decode only, one new position per
// row): q and the row's own k are rotated in registers (the partner of dim d < hd/2 is held by
// lane ^ 16), the position len - 1 uses that k and v instead of the cache, and the caller writes
// them to the cache. The operations are those of rope_kv_append_f32, so the bits are the same.
template <int EPL, int ATT_U>
__device__ __forceinline__ void attn_impl(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,
    const bf16_t* __restrict__ v_cache, const int* __restrict__ table_s, int block_size, int row, int qh,
    bool active, int len, int start, int end, int nq, int nkv, int hd, float scale, int kw, int KW,
    const float* __restrict__ inv_freq, bool rope, unsigned int kcur[EPL / 2], unsigned int vcur[EPL / 2],
    float acc[EPL], float& m_out, float& l_out) {
    const int lane = threadIdx.x & 31;
    const int kvh = qh / (nq / nkv);
    const i64 kv_row = (i64)nkv * hd;
    const i64 head_off = (i64)kvh * hd + lane * EPL;
    const float* qrow = qkv + (i64)row * q_stride;
    float q[EPL];
#pragma unroll
    for (int e = 0; e < EPL; ++e) {
        q[e] = qrow[(i64)qh * hd + lane * EPL + e];
        acc[e] = 0.0f;
    }
    if (rope) {
        // All lanes take part in the shuffles; `len - 1` is the row's position.
        const bool hi = lane >= 16;
        float kr[EPL], vr[EPL];
#pragma unroll
        for (int e = 0; e < EPL; ++e) {
            const float kraw = qrow[(i64)(nq + kvh) * hd + lane * EPL + e];
            const float qp = __shfl_xor_sync(0xffffffffu, q[e], 16);
            const float kp = __shfl_xor_sync(0xffffffffu, kraw, 16);
            float sn, cs;
            rope_sincos(len - 1, inv_freq[(lane & 15) * EPL + e], &sn, &cs);
            q[e] = hi ? rope_hi(qp, q[e], sn, cs) : rope_lo(q[e], qp, sn, cs);
            kr[e] = hi ? rope_hi(kp, kraw, sn, cs) : rope_lo(kraw, kp, sn, cs);
            vr[e] = qrow[(i64)(nq + nkv + kvh) * hd + lane * EPL + e];
        }
#pragma unroll
        for (int i = 0; i < EPL / 2; ++i) {
            kcur[i] = pack_bf16(kr[2 * i], kr[2 * i + 1]);
            vcur[i] = pack_bf16(vr[2 * i], vr[2 * i + 1]);
        }
    }
#pragma unroll
    for (int e = 0; e < EPL; ++e) q[e] = active ? q[e] * scale : 0.0f;
    const int cur = rope ? len - 1 : -1;
    float m = -INFINITY, l = 0.0f;
    for (int p0 = start + kw * ATT_U; p0 < end; p0 += KW * ATT_U) {
        unsigned int kk[ATT_U][EPL / 2], vv[ATT_U][EPL / 2];
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            const int p = min(p0 + u, end - 1);
            const i64 slot = (i64)table_s[p / block_size] * block_size + p % block_size;
            load_raw<EPL>(k_cache + slot * kv_row + head_off, kk[u]);
            load_raw<EPL>(v_cache + slot * kv_row + head_off, vv[u]);
            if (p == cur) {
#pragma unroll
                for (int i = 0; i < EPL / 2; ++i) {
                    kk[u][i] = kcur[i];
                    vv[u][i] = vcur[i];
                }
            }
        }
        float sc[ATT_U];
        float mx = m;
#pragma unroll
        for (int u = 0; u < ATT_U; ++u) {
            float dot = 0.0f;
#pragma unroll
            for (int i = 0; i < EPL / 2; ++i) {
                dot = fmaf(q[2 * i], bf16_lo(kk[u][i]), dot);
                dot = fmaf(q[2 * i + 1], bf16_hi(kk[u][i]), dot);
            }
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
            for (int i = 0; i < EPL / 2; ++i) {
                acc[2 * i] = fmaf(pu, bf16_lo(vv[u][i]), acc[2 * i]);
                acc[2 * i + 1] = fmaf(pu, bf16_hi(vv[u][i]), acc[2 * i + 1]);
            }
        }
        m = mx;
    }
    m_out = m;
    l_out = l;
}

// Shared body of the decode kernels, for EPL = hd / 32. blockDim = ATT_THREADS * KW: warp w serves query head slot
// w % ATT_WARPS with key lane w / ATT_WARPS; KW > 1 needs the combine buffers `cm` / `ca`.
template <int EPL, int U>
__device__ __forceinline__ void attn_decode_body(
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache, const bf16_t* __restrict__ v_cache,
    const int* __restrict__ block_table, int max_blocks, int block_size, const int* __restrict__ row_seq,
    const int* __restrict__ row_pos, const int* __restrict__ row_slot, const float* __restrict__ inv_freq,
    int rope_fused, bf16_t* wk_cache, bf16_t* wv_cache, bf16_t* __restrict__ out,
    float* __restrict__ part_acc, float* __restrict__ part_ml, int* __restrict__ counters, int nq, int nkv,
    int hd, int chunk, float scale, int* table_s, float* cm, float* ca) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int KW = blockDim.x / ATT_THREADS;
    const int slot_w = warp % ATT_WARPS, kw = warp / ATT_WARPS;
    const int qh_raw = blockIdx.x * ATT_WARPS + slot_w;
    const bool active = qh_raw < nq;  // no early return: the reductions below synchronise
    const int qh = active ? qh_raw : nq - 1;
    const int row = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
    const int seq = row_seq[row];
    const int len = row_pos[row] + 1;
    const int start = split * chunk;
    const int end = active ? min(len, start + chunk) : start;
    const int nblk = min(max_blocks, ATT_MAX_TABLE);
    for (int i = threadIdx.x; i < nblk; i += blockDim.x) table_s[i] = block_table[(i64)seq * max_blocks + i];
    __syncthreads();
    const bool rope = rope_fused != 0;
    float acc[8];
    unsigned int kcur[EPL / 2], vcur[EPL / 2];  // set, and read, only with rope
    float m, l;
    attn_impl<EPL, U>(qkv, q_stride, k_cache, v_cache, table_s, block_size, row, qh, active, len, start, end, nq,
                   nkv, hd, scale, kw, KW, inv_freq, rope, kcur, vcur, acc, m, l);
    // The fused KV append: one warp per KV head (the group's first query head, split 0, key
    // lane 0) writes the row's rotated k and its v to the cache.
    if (rope && active && split == 0 && kw == 0 && qh % (nq / nkv) == 0) {
        const int kvh = qh / (nq / nkv);
        const i64 dst = (i64)row_slot[row] * nkv * hd + (i64)kvh * hd + lane * EPL;
#pragma unroll
        for (int i = 0; i < EPL / 2; ++i) {
            reinterpret_cast<unsigned int*>(wk_cache + dst)[i] = kcur[i];
            reinterpret_cast<unsigned int*>(wv_cache + dst)[i] = vcur[i];
        }
    }
    if (KW > 1) {
        // Combine the key lanes of each head slot on chip, in key-lane order.
        if (lane == 0) {
            cm[(kw * ATT_WARPS + slot_w) * 2] = m;
            cm[(kw * ATT_WARPS + slot_w) * 2 + 1] = l;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (e < EPL) ca[(kw * ATT_WARPS + slot_w) * hd + lane * EPL + e] = acc[e];
        }
        __syncthreads();
        if (kw == 0) {
            float M = -INFINITY;
            for (int j = 0; j < KW; ++j) M = fmaxf(M, cm[(j * ATT_WARPS + slot_w) * 2]);
            float L = 0.0f;
            float o[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = 0.0f;
            for (int j = 0; j < KW; ++j) {
                const float mj = cm[(j * ATT_WARPS + slot_w) * 2];
                const float w = mj == -INFINITY ? 0.0f : expf(mj - M);
                L += w * cm[(j * ATT_WARPS + slot_w) * 2 + 1];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    if (e < EPL) o[e] += w * ca[(j * ATT_WARPS + slot_w) * hd + lane * EPL + e];
                }
            }
            m = M;
            l = L;
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[e] = o[e];
        }
    }
    const bool lead = kw == 0;  // warps that hold their head slot's result from here on
    if (splits == 1) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (lead && active && e < EPL) out[(i64)row * nq * hd + (i64)qh * hd + lane * EPL + e] = f32_to_bf16(acc[e] / l);
        }
        return;
    }
    const i64 base = ((i64)row * nq + qh) * splits + split;
    if (lead && active) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            if (e < EPL) part_acc[base * hd + lane * EPL + e] = acc[e];
        }
        if (lane == 0) {
            part_ml[base * 2] = m;
            part_ml[base * 2 + 1] = l;
        }
    }
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
    if (!is_last || !active || !lead) return;
    __threadfence();
    const i64 hbase = ((i64)row * nq + qh) * splits;
    // Lane s reads split s's (max, sum) once (32 splits per round); the warp reduces them in
    // registers. Splits that saw no key (max -inf) weigh 0.
    float M = -INFINITY;
    float m_lane = -INFINITY, l_lane = 0.0f;
    for (int sp = lane; sp < splits; sp += 32) {
        const float2 ml = __ldcg(reinterpret_cast<const float2*>(part_ml + (hbase + sp) * 2));
        if (sp < 32) {
            m_lane = ml.x;
            l_lane = ml.y;
        }
        M = fmaxf(M, ml.x);
    }
    M = warp_max(M);
    float L = 0.0f;
    for (int sp = lane; sp < splits; sp += 32) {
        float ms = m_lane, ls = l_lane;
        if (sp >= 32) {
            const float2 ml = __ldcg(reinterpret_cast<const float2*>(part_ml + (hbase + sp) * 2));
            ms = ml.x;
            ls = ml.y;
        }
        if (ms != -INFINITY) L += expf(ms - M) * ls;
    }
    L = warp_sum(L);
    float o[EPL];
#pragma unroll
    for (int e = 0; e < EPL; ++e) o[e] = 0.0f;
    // Lane j holds split (sp0 + j)'s weight; the splits are then summed in order, eight
    // splits' partial loads in flight at a time (same operations and order as one at a time).
    for (int sp0 = 0; sp0 < splits; sp0 += 32) {
        float w_lane = 0.0f;
        if (sp0 + lane < splits) {
            const float ms = sp0 == 0 ? m_lane : __ldcg(part_ml + (hbase + sp0 + lane) * 2);
            w_lane = ms == -INFINITY ? 0.0f : expf(ms - M);
        }
        const int n = min(32, splits - sp0);
        for (int j0 = 0; j0 < n; j0 += 8) {
            float pv[8][EPL];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float* pa = part_acc + (hbase + sp0 + min(j0 + j, n - 1)) * hd + lane * EPL;
#pragma unroll
                for (int e = 0; e < EPL; ++e) pv[j][e] = __ldcg(pa + e);
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float w = __shfl_sync(0xffffffffu, w_lane, (j0 + j) & 31);
                if (j0 + j < n) {
#pragma unroll
                    for (int e = 0; e < EPL; ++e) o[e] += w * pv[j][e];
                }
            }
        }
    }
#pragma unroll
    for (int e = 0; e < EPL; ++e) out[(i64)row * nq * hd + (i64)qh * hd + lane * EPL + e] = f32_to_bf16(o[e] / L);
}

// The decode kernels' common parameter list and the same names as arguments (one definition,
// four entries). With a paged cache and rope_fused, k_cache/v_cache and wk_cache/wv_cache are
// the same buffer despite __restrict__: the only location both read and written is the row's
// own new slot, whose loaded value attn_impl always replaces by the registers it writes.
#define ATT_PARAMS                                                                                        \
    const float* __restrict__ qkv, int q_stride, const bf16_t* __restrict__ k_cache,                      \
        const bf16_t* __restrict__ v_cache, const int* __restrict__ block_table, int max_blocks,            \
        int block_size, const int* __restrict__ row_seq, const int* __restrict__ row_pos,                  \
        const int* __restrict__ row_slot, const float* __restrict__ inv_freq, int rope_fused,              \
        bf16_t* wk_cache, bf16_t* wv_cache, bf16_t* __restrict__ out, float* __restrict__ part_acc,        \
        float* __restrict__ part_ml, int* __restrict__ counters, int nq, int nkv, int hd, int chunk,       \
        float scale
#define ATT_ARGS                                                                                          \
    qkv, q_stride, k_cache, v_cache, block_table, max_blocks, block_size, row_seq, row_pos, row_slot,      \
        inv_freq, rope_fused, wk_cache, wv_cache, out, part_acc, part_ml, counters, nq, nkv, hd, chunk, scale

// grid = (ceil(nq / ATT_WARPS), rows, splits), block = ATT_THREADS; hd in {64, 128, 256}.
// `k_cache`/`v_cache` are what attention reads (the cache, or the gathered copy of a contiguous
// cache); `wk_cache`/`wv_cache` the cache itself, which the fused append writes at row_slot.
extern "C" __global__ void __launch_bounds__(ATT_THREADS) attn_decode_bf16(
    ATT_PARAMS) {
    __shared__ int table_s[ATT_MAX_TABLE];
    if (hd == 256) {
        attn_decode_body<8, 8>(ATT_ARGS, table_s, 0, 0);
    } else if (hd == 128) {
        attn_decode_body<4, 16>(ATT_ARGS, table_s, 0, 0);
    } else {
        attn_decode_body<2, 16>(ATT_ARGS, table_s, 0, 0);
    }
}

// As attn_decode_bf16 with KW = blockDim / ATT_THREADS key lanes (2..ATT_MAX_KW) per query head,
// combined in shared memory: short decode contexts get their parallelism inside the block
// instead of from splits that meet again through global memory. One kernel per head size keeps
// each within the register budget of its block size (KW <= 4 for hd 256).
template <int EPL, int MAXT>
__device__ __forceinline__ void attn_decode_kw(
    ATT_PARAMS) {
    __shared__ int table_s[ATT_MAX_TABLE];
    __shared__ float cm[ATT_MAX_KW * ATT_WARPS * 2];
    __shared__ float ca[(MAXT / 32) * EPL * 32];
    attn_decode_body<EPL, 8>(ATT_ARGS, table_s, cm, ca);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS * ATT_MAX_KW) attn_decode_kw_hd64_bf16(
    ATT_PARAMS) {
    attn_decode_kw<2, ATT_THREADS * ATT_MAX_KW>(ATT_ARGS);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS * ATT_MAX_KW) attn_decode_kw_hd128_bf16(
    ATT_PARAMS) {
    attn_decode_kw<4, ATT_THREADS * ATT_MAX_KW>(ATT_ARGS);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS * ATT_MAX_KW / 2) attn_decode_kw_hd256_bf16(
    ATT_PARAMS) {
    attn_decode_kw<8, ATT_THREADS * ATT_MAX_KW / 2>(ATT_ARGS);
}
