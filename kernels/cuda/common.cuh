// Shared helpers for every gapscope kernel module. The registry prepends this text to each
// module before NVRTC compiles it, so the modules need no include path.
//
// Conventions: bf16 and f16 values travel as raw 16-bit patterns (`bf16_t`, `f16_t`) so no
// CUDA header is needed; f32 is the accumulation type everywhere.

typedef unsigned short bf16_t;
typedef unsigned short f16_t;
typedef signed char i8;
typedef unsigned char u8;
typedef long long i64;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

__device__ __forceinline__ float bf16_to_f32(bf16_t h) {
    return __uint_as_float(((unsigned int)h) << 16);
}

// Round to nearest even, as torch and cuBLAS do; NaN stays NaN.
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        return (bf16_t)((u >> 16) | ((u & 0xffffu) ? 0x40u : 0u));
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

__device__ __forceinline__ float f16_to_f32(f16_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// The low and high bf16 halves of a 32-bit word, widened to f32.
__device__ __forceinline__ float bf16_lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Signed x signed 4-way int8 dot product with accumulate.
__device__ __forceinline__ int dp4a_ss(int a, int b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Unsigned (a) x signed (b) 4-way int8 dot product with accumulate.
__device__ __forceinline__ int dp4a_us(unsigned int a, int b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// RMSNorm of one f32 row by the calling block: out = bf16(x * rsqrt(mean(x^2) + eps) * w).
// The sum runs in a fixed order for a given blockDim (a multiple of 32), so rms_norm_f32 and the
// norm fused into the batch-1 GEMV's prologue (into shared memory), both at RMS_THREADS, give the
// same bits. Rows of a multiple of 4 (every hidden size) go as float4, the first RMS_V of them
// per thread loaded at once and kept in registers for the output pass.
#define RMS_THREADS 256
#define RMS_V 4
__device__ __forceinline__ float4 ldcg4(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float sumsq4(float4 v, float ss) {
    ss = fmaf(v.x, v.x, ss);
    ss = fmaf(v.y, v.y, ss);
    ss = fmaf(v.z, v.z, ss);
    return fmaf(v.w, v.w, ss);
}
__device__ __forceinline__ void norm_store4(bf16_t* out, float4 x, float4 w, float scale) {
    const unsigned int lo = (unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.x, scale), w.x)) |
                            ((unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.y, scale), w.y)) << 16);
    const unsigned int hi = (unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.z, scale), w.z)) |
                            ((unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.w, scale), w.w)) << 16);
    *reinterpret_cast<uint2*>(out) = make_uint2(lo, hi);
}
__device__ __forceinline__ void rms_norm_row(const float* x, const float* __restrict__ w, bf16_t* __restrict__ out,
                                             int n, float eps) {
    __shared__ float partial[32];
    __shared__ float total;
    const int T = blockDim.x;
    const bool vec = (n & 3) == 0;
    const int nv = vec ? n >> 2 : 0;  // float4 groups
    float4 xv[RMS_V], wv[RMS_V];
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        const int g = threadIdx.x + u * T;
        if (g < nv) {
            xv[u] = ldcg4(x + 4 * g);
            wv[u] = __ldg(reinterpret_cast<const float4*>(w) + g);
        }
    }
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        if (threadIdx.x + u * T < nv) ss = sumsq4(xv[u], ss);
    }
    for (int g = threadIdx.x + RMS_V * T; g < nv; g += T) ss = sumsq4(ldcg4(x + 4 * g), ss);
    if (!vec) {
        for (int i = threadIdx.x; i < n; i += T) {
            const float v = __ldcg(x + i);
            ss = fmaf(v, v, ss);
        }
    }
    ss = warp_sum(ss);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        const int nw = (T + 31) >> 5;
        float v = lane < nw ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    const float scale = rsqrtf(total / (float)n + eps);
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        const int g = threadIdx.x + u * T;
        if (g < nv) norm_store4(out + 4 * g, xv[u], wv[u], scale);
    }
    for (int g = threadIdx.x + RMS_V * T; g < nv; g += T) {
        norm_store4(out + 4 * g, ldcg4(x + 4 * g), __ldg(reinterpret_cast<const float4*>(w) + g), scale);
    }
    if (!vec) {
        for (int i = threadIdx.x; i < n; i += T) out[i] = f32_to_bf16(__fmul_rn(__fmul_rn(__ldcg(x + i), scale), w[i]));
    }
}

// rotate_half RoPE of one (x0, x1) pair at angle pos * inv_freq, each product and sum rounded
// on its own (no FMA contraction): the unfused rope kernel and the rope fused into decode
// attention give the same bits, and the f32 CPU reference computes the same operations.
__device__ __forceinline__ void rope_sincos(int pos, float inv_freq, float* s, float* c) {
    sincosf(__fmul_rn((float)pos, inv_freq), s, c);
}
__device__ __forceinline__ float rope_lo(float x0, float x1, float s, float c) {
    return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}
__device__ __forceinline__ float rope_hi(float x0, float x1, float s, float c) {
    return __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// Output modes shared by every linear kernel (GEMV, MMVQ, MMQ).
#define OUT_STORE 0      // y[b, o] = acc + bias[o]
#define OUT_ACCUMULATE 1 // y[b, o] += acc (residual add fused)
#define OUT_SWIGLU 2     // weight rows interleave gate/up; h[b, o] = bf16(silu(acc_gate) * acc_up)


__device__ __forceinline__ int4 int4_zero() {
    int4 v;
    v.x = v.y = v.z = v.w = 0;
    return v;
}

__device__ __forceinline__ uint4 uint4_zero() {
    uint4 v;
    v.x = v.y = v.z = v.w = 0u;
    return v;
}

// Streaming 16-byte weight load: read-only path, no L1 allocation, 256-byte L2 prefetch.
__device__ __forceinline__ uint4 ldg_stream(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// int32 -> f32 without a conversion instruction (exact for |s| < 2^22, which every int8 block
// dot product is: 32 * 127 * 127 < 2^19). Same value as (float)s.
__device__ __forceinline__ float exact_i2f(int s) {
    return __int_as_float(s + 0x4B400000) - 12582912.0f;
}

// One quant block's contribution, computed with the same rounded f32 operations in every
// int8 kernel (no contraction), then summed in f64: MMVQ and MMQ differ only in summation
// order, which f64 makes invisible after the final rounding to f32, so switching the
// dispatch threshold keeps greedy output identical.
__device__ __forceinline__ float block_term_q8(float dw, float dx, int s) {
    return __fmul_rn(__fmul_rn(dw, dx), exact_i2f(s));
}

__device__ __forceinline__ float block_term_q4(float dw, float dx, float sx, int s) {
    return __fmul_rn(dw, __fsub_rn(__fmul_rn(dx, exact_i2f(s)), __fmul_rn(8.0f, sx)));
}

__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Programmatic dependent launch (sm_90+). With the engine's PDL lever a kernel may start while
// the previous one drains: everything before `pdl_wait` overlaps it and may touch only data no
// earlier kernel writes (weights); `pdl_wait` returns once the previous grid has completed and
// its writes are visible. `pdl_trigger` lets the next kernel launch; every kernel calls it after
// its wait, so at most two kernels overlap. Launched without the attribute, both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_enter() {
    pdl_wait();
    pdl_trigger();
}

// Warms L2 with [p, p + bytes), spread over the block's threads: MMQ calls it on its row tile
// before `pdl_wait`, so its weight stream starts while the previous kernel finishes. (Tried on
// the batch-1 GEMV it lost 2-18%; that kernel loads its first weights into registers before the
// wait instead: docs/decisions/2026-11-22-batch1-bf16-decode.md.)
__device__ __forceinline__ void prefetch_l2(const void* p, i64 bytes) {
    for (i64 off = (i64)threadIdx.x * 128; off < bytes; off += (i64)blockDim.x * 128) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char*)p + off));
    }
}
