// Activation quantization to q8_1 blocks (32 int8 values, an f32 scale and the scaled sum), the
// input format of the MMVQ and MMQ kernels. One warp per block of 32 values.

// Block `blk` of x (32 bf16 values) -> this lane's int8 value; lane 0 also gets the scale and the
// scaled sum. Both entries run exactly this, so their values are the same bits.
__device__ __forceinline__ void quantize_block(const bf16_t* __restrict__ x, i64 blk, int lane, i8* q_out,
                                               float* d_out, float* s_out) {
    const float v = bf16_to_f32(x[blk * 32 + lane]);
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    *q_out = (i8)q;
    const int sum = warp_sum_int(q);
    *d_out = d;
    *s_out = d * (float)sum;
}

// Row-major, for MMVQ: x [nb, K] bf16 -> qx [nb, K] int8, dx [nb, K/32] f32,
// sx [nb, K/32] f32 (= dx * sum(qx)).
extern "C" __global__ void quantize_q8_1_bf16(const bf16_t* __restrict__ x, i8* __restrict__ qx,
                                              float* __restrict__ dx, float* __restrict__ sx, i64 n_blocks) {
    pdl_enter();
    const i64 blk = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (blk >= n_blocks) return;
    const int lane = threadIdx.x & 31;
    i8 q;
    float d, s;
    quantize_block(x, blk, lane, &q, &d, &s);
    qx[blk * 32 + lane] = q;
    if (lane == 0) {
        dx[blk] = d;
        sx[blk] = s;
    }
}

// K-major, for MMQ: the same values with quant block kb of every row side by side:
// qx [K/32, nb, 32] int8, dx and sx [K/32, nb] f32. MMQ's warps then read one block of 8
// adjacent columns as 256 contiguous bytes (and their scales as 32), not 8 scattered pieces.
extern "C" __global__ void quantize_q8_1_bf16_kmajor(const bf16_t* __restrict__ x, i8* __restrict__ qx,
                                                     float* __restrict__ dx, float* __restrict__ sx, i64 n_blocks,
                                                     int kblocks) {
    pdl_enter();
    const i64 blk = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (blk >= n_blocks) return;
    const int lane = threadIdx.x & 31;
    i8 q;
    float d, s;
    quantize_block(x, blk, lane, &q, &d, &s);
    const i64 nb = n_blocks / kblocks, row = blk / kblocks, kb = blk % kblocks;
    const i64 at = kb * nb + row;
    qx[at * 32 + lane] = q;
    if (lane == 0) {
        dx[at] = d;
        sx[at] = s;
    }
}
