// Rotary embedding (HF rotate_half convention) fused with the KV-cache append: q is rotated in
// place, k is rotated and written to the cache as bf16, v is written unchanged.

// blockIdx.x = row. qkv row layout: [q heads | k heads | v heads], each hd wide.
// Cache layout: [slot, nkv, hd] bf16; slots[row] names the row's cache slot. The first `rot`
// dimensions of each head rotate (pairs i, i + rot / 2); the rest pass through (partial RoPE).
extern "C" __global__ void rope_kv_append_f32(float* __restrict__ qkv, const int* __restrict__ pos,
                                             const int* __restrict__ slots, const float* __restrict__ inv_freq,
                                             bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache,
                                             int nq, int nkv, int hd, int row_stride, int rot) {
    pdl_enter();
    const i64 row = blockIdx.x;
    const int p = pos[row];
    const i64 slot = slots[row];
    float* q = qkv + row * row_stride;
    const float* k = q + (i64)nq * hd;
    const float* v = k + (i64)nkv * hd;
    const int half = rot >> 1;
    bf16_t* kc = k_cache + slot * nkv * hd;
    bf16_t* vc = v_cache + slot * nkv * hd;
    for (int idx = threadIdx.x; idx < nq * half; idx += blockDim.x) {
        const int h = idx / half, i = idx - h * half;
        float s, c;
        rope_sincos(p, inv_freq[i], &s, &c);
        float* qh = q + h * hd;
        const float x0 = qh[i], x1 = qh[i + half];
        qh[i] = rope_lo(x0, x1, s, c);
        qh[i + half] = rope_hi(x0, x1, s, c);
    }
    for (int idx = threadIdx.x; idx < nkv * half; idx += blockDim.x) {
        const int h = idx / half, i = idx - h * half;
        float s, c;
        rope_sincos(p, inv_freq[i], &s, &c);
        const float x0 = k[h * hd + i], x1 = k[h * hd + i + half];
        kc[h * hd + i] = f32_to_bf16(rope_lo(x0, x1, s, c));
        kc[h * hd + i + half] = f32_to_bf16(rope_hi(x0, x1, s, c));
    }
    const int pass = hd - rot;
    for (int idx = threadIdx.x; idx < nkv * pass; idx += blockDim.x) {
        const int h = idx / pass, i = rot + idx - h * pass;
        kc[h * hd + i] = f32_to_bf16(k[h * hd + i]);
    }
    for (int idx = threadIdx.x; idx < nkv * hd; idx += blockDim.x) vc[idx] = f32_to_bf16(v[idx]);
}
