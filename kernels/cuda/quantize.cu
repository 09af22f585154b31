// Activation quantization to q8_1 blocks (32 int8 values, an f32 scale and the scaled sum), the
// input format of the MMVQ and MMQ kernels. One warp per block of 32 values.

// Block `blk` of x (32 bf16 values), quantized by the calling warp into slot `at` of qx (32
// int8 values), dx and sx. Both entries run exactly this, so their values are the same bits.
__device__ __forceinline__ void quantize_block(const bf16_t* __restrict__ x, i8* __restrict__ qx,
                                               float* __restrict__ dx, float* __restrict__ sx, i64 blk, i64 at,
                                               int lane) {
    const float v = bf16_to_f32(x[blk * 32 + lane]);
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    qx[at * 32 + lane] = (i8)q;
    const int sum = warp_sum_int(q);
    if (lane == 0) {
        dx[at] = d;
        sx[at] = d * (float)sum;
    }
}

// Row-major, for MMVQ: x [nb, K] bf16 -> qx [nb, K] int8, dx [nb, K/32] f32,
// sx [nb, K/32] f32 (= dx * sum(qx)).
extern "C" __global__ void quantize_q8_1_bf16(const bf16_t* __restrict__ x, i8* __restrict__ qx,
                                              float* __restrict__ dx, float* __restrict__ sx, i64 n_blocks) {
    pdl_enter();
    const i64 blk = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (blk >= n_blocks) return;
    quantize_block(x, qx, dx, sx, blk, blk, threadIdx.x & 31);
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
    const i64 nb = n_blocks / kblocks, row = blk / kblocks, kb = blk % kblocks;
    quantize_block(x, qx, dx, sx, blk, kb * nb + row, threadIdx.x & 31);
}
