// Greedy sampling: argmax over each logits row, ties to the lowest index so the result is
// deterministic (NaN is never chosen; an all-NaN row gives 0). grid = (rows, slices): each block
// reduces one slice of the row; the last block of a row to finish reduces the slices' winners.
// The winner is a maximum under a total order, so the order the slices finish in cannot matter.

__device__ __forceinline__ void argmax_merge(float& bv, int& bi, float ov, int oi) {
    if (ov > bv || (ov == bv && oi < bi)) {
        bv = ov;
        bi = oi;
    }
}

// Block-wide argmax of (bv, bi); the result is valid in thread 0.
__device__ __forceinline__ void argmax_block(float& bv, int& bi) {
    __shared__ float best_v[32];
    __shared__ int best_i[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        argmax_merge(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        best_v[warp] = bv;
        best_i[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = blockDim.x >> 5;
        bv = lane < nw ? best_v[lane] : -INFINITY;
        bi = lane < nw ? best_i[lane] : 0x7fffffff;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            argmax_merge(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
        }
    }
}

// part_v / part_i: [rows, gridDim.y] slice winners; counters: [rows], zero between launches.
extern "C" __global__ void __launch_bounds__(1024) argmax_f32(const float* __restrict__ logits, int vocab,
                                                             int* __restrict__ out, float* __restrict__ part_v,
                                                             int* __restrict__ part_i, int* __restrict__ counters) {
    pdl_enter();
    const int row = blockIdx.x, slice = blockIdx.y, slices = gridDim.y;
    const float* r = logits + (i64)row * vocab;
    const int per = (vocab + slices - 1) / slices;
    const int lo = slice * per, hi = min(vocab, lo + per);
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) argmax_merge(bv, bi, r[i], i);
    argmax_block(bv, bi);
    if (slices == 1) {
        if (threadIdx.x == 0) out[row] = bi == 0x7fffffff ? 0 : bi;
        return;
    }
    __shared__ int is_last;
    if (threadIdx.x == 0) {
        part_v[(i64)row * slices + slice] = bv;
        part_i[(i64)row * slices + slice] = bi;
        __threadfence();
        const int ticket = atomicAdd(counters + row, 1);
        is_last = ticket == slices - 1;
        if (is_last) counters[row] = 0;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    bv = -INFINITY;
    bi = 0x7fffffff;
    for (int s = threadIdx.x; s < slices; s += blockDim.x) {
        argmax_merge(bv, bi, __ldcg(part_v + (i64)row * slices + s), __ldcg(part_i + (i64)row * slices + s));
    }
    argmax_block(bv, bi);
    if (threadIdx.x == 0) out[row] = bi == 0x7fffffff ? 0 : bi;
}
