// Timing probe for calibrating the engine's per-launch CUDA events. Each timed launch sits
// between two event records (external event-record nodes in a graph), and their elapsed time
// includes the latency of those records on top of the kernel. This kernel knows its own
// duration: the engine wraps it in an event pair exactly as it wraps a real launch, and
// elapsed minus (t1 - t0) is that latency, which it then subtracts from every timed launch.

__device__ __forceinline__ unsigned long long global_timer_ns() {
    unsigned long long t;
    // volatile: each read must happen where it is written, never be hoisted out of the loop.
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Launch with 1 block of 32 threads. Thread 0 spins for at least spin_ns of %globaltimer time,
// then writes out[0] = t0 (first reading) and out[1] = t1 (last reading), fences, and writes
// out[2] = t2, read once those stores are visible. A kernel's final stores are kernel time to
// CUPTI, so the calibration counts t2 - t0 as the probe's own time, not t1 - t0.
extern "C" __global__ void timing_probe(unsigned long long* __restrict__ out, unsigned long long spin_ns) {
    if (threadIdx.x != 0) return;
    const unsigned long long t0 = global_timer_ns();
    unsigned long long t = t0;
    while (t - t0 < spin_ns) t = global_timer_ns();
    out[0] = t0;
    out[1] = t;
    __threadfence();
    out[2] = global_timer_ns();
}

// A shaped probe's ending: every thread stores `value` to scratch[global thread index] (a real
// kernel ends with its stores), and once the block's stores are visible thread 0 writes the
// block's t0, t1 and t2 (read after them) at out[3 * block ..].
__device__ __forceinline__ void block_stamps(unsigned long long* __restrict__ out,
                                             unsigned long long* __restrict__ scratch, unsigned long long t0,
                                             unsigned long long t1, unsigned long long value) {
    scratch[(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x] = value;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = t0;
        out[3 * blockIdx.x + 1] = t1;
        __threadfence();
        out[3 * blockIdx.x + 2] = global_timer_ns();
    }
}

// The same probe in any launch shape, to see how the event latency depends on a kernel's grid
// and block (`bench --event-latency-by-shape`). Thread 0 of every block spins for spin_ns from
// its own first reading; the block waits for it, every thread stores one value (a real kernel
// ends with its stores), and thread 0 writes its block's t0, t1 and, once the block's stores
// are visible, t2 at out[3 * block ..]. The host takes min t0 and max t2 over the blocks: the
// kernel's own extent. The stores go to scratch[global thread index].
extern "C" __global__ void timing_probe_grid(unsigned long long* __restrict__ out,
                                             unsigned long long* __restrict__ scratch, unsigned long long spin_ns) {
    __shared__ unsigned long long last;
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) {
        t0 = global_timer_ns();
        unsigned long long t = t0;
        while (t - t0 < spin_ns) t = global_timer_ns();
        last = t;
    }
    __syncthreads();
    const unsigned long long t1 = last;
    block_stamps(out, scratch, t0, t1, t1);
}

// A probe that streams memory like a GEMV instead of spinning (`bench
// --event-latency-after-load`): every thread reads 16-byte words of src (n16 of them, far
// larger than L2) with the grid's stride until spin_ns of %globaltimer have passed since its
// block's start, then stores a value derived from them (so the loads are kept) and writes its
// block's t0, t1, t2 as timing_probe_grid does.
extern "C" __global__ void timing_probe_stream(unsigned long long* __restrict__ out,
                                               unsigned long long* __restrict__ scratch, const uint4* __restrict__ src,
                                               long long n16, unsigned long long spin_ns) {
    __shared__ unsigned long long start, last;
    if (threadIdx.x == 0) start = global_timer_ns();
    __syncthreads();
    const unsigned long long t0 = start;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = 0;
    unsigned long long t = t0;
    while (t - t0 < spin_ns) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const uint4 v = ldg_stream(src + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
            i += stride;
            if (i >= n16) i -= n16;
        }
        t = global_timer_ns();
    }
    if (threadIdx.x == 0) last = t;
    __syncthreads();
    block_stamps(out, scratch, t0, last, acc);
}
