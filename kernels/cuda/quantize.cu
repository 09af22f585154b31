// Activation quantization to q8_1 blocks (32 int8 values, an f32 scale and the scaled sum), the
// input format of the MMVQ and MMQ kernels. One warp per block of 32 values.

// x: [nb, K] bf16 -> qx [nb, K] int8, dx [nb, K/32] f32, sx [nb, K/32] f32 (= dx * sum(qx)).
extern "C" __global__ void quantize_q8_1_bf16(const bf16_t* __restrict__ x, i8* __restrict__ qx,
                                              float* __restrict__ dx, float* __restrict__ sx, i64 n_blocks) {
    pdl_enter();
    const i64 blk = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (blk >= n_blocks) return;
    const int lane = threadIdx.x & 31;
    const float v = bf16_to_f32(x[blk * 32 + lane]);
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    qx[blk * 32 + lane] = (i8)q;
    const int sum = warp_sum_int(q);
    if (lane == 0) {
        dx[blk] = d;
        sx[blk] = d * (float)sum;
    }
}
