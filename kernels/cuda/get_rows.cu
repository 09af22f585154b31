// Row gathers: the token embedding lookup, picking the last hidden row of each sequence after
// prefill, and the KV gather that a contiguous (non-paged) cache needs before attention.

// out[r, :] = f32(table[ids[r], :]); one block per row.
extern "C" __global__ void get_rows_bf16(const bf16_t* __restrict__ table, const int* __restrict__ ids,
                                         float* __restrict__ out, int cols) {
    pdl_enter();
    const i64 row = blockIdx.x;
    const bf16_t* src = table + (i64)ids[row] * cols;
    float* dst = out + row * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = bf16_to_f32(src[c]);
}

// out[r, :] = src[ids[r], :] for f32 rows.
extern "C" __global__ void get_rows_f32(const float* __restrict__ src, const int* __restrict__ ids,
                                        float* __restrict__ out, int cols) {
    pdl_enter();
    const i64 row = blockIdx.x;
    const float* s = src + (i64)ids[row] * cols;
    float* d = out + row * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

// Contiguous-KV gather: for sequence s and position p < seq_len[s], copy the cache row at
// slot_map[s * cap + p] into dst[(s * cap + p), :]. blockIdx = (p, s, 0 for K / 1 for V).
// Rows are `row_vec` 16-byte vectors long.
extern "C" __global__ void kv_gather_bf16(const uint4* __restrict__ k_pool, const uint4* __restrict__ v_pool,
                                          uint4* __restrict__ k_dst, uint4* __restrict__ v_dst,
                                          const int* __restrict__ slot_map, const int* __restrict__ seq_len,
                                          int cap, int row_vec) {
    pdl_enter();
    const int p = blockIdx.x;
    const int s = blockIdx.y;
    if (p >= seq_len[s]) return;
    const uint4* src = (blockIdx.z == 0 ? k_pool : v_pool) + (i64)slot_map[(i64)s * cap + p] * row_vec;
    uint4* dst = (blockIdx.z == 0 ? k_dst : v_dst) + ((i64)s * cap + p) * row_vec;
    for (int i = threadIdx.x; i < row_vec; i += blockDim.x) dst[i] = src[i];
}
