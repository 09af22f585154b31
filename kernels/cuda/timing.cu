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
