// A plain CUDA program for gapscope-record's acceptance run (built with nvcc on the GPU
// machine by run-gpu.sh). Modes:
//   normal        copies of every kind, a memset, kernels, a CUDA graph replayed 5 times, an
//                 NVTX range, and a cudaProfilerStart/Stop range around 7 launches of `inner`;
//                 prints the expected counts as one JSON line
//   abort N       N launches (synchronised every 100), a pause so the recorder's flusher runs,
//                 then 50 more launches and abort()
//   segv N        the same, ending in a write through a null pointer
//   nocuda        exits 3 without touching CUDA
//   multigpu      on every visible GPU d: 5 + d `scale` launches and one 1 MiB DtoD copy
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void scale(float* x, int n, float a) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
__global__ void add1(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
__global__ void inner(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 0.5f + 1.0f; }
__global__ void g1(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 2.0f; }
__global__ void g2(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 0.25f; }
__global__ void g3(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] -= 3.0f; }

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "normal";
    if (!strcmp(mode, "nocuda")) { printf("{\"mode\":\"nocuda\"}\n"); return 3; }
    if (!strcmp(mode, "multigpu")) {
        int count = 0;
        CK(cudaGetDeviceCount(&count));
        const int m = 1 << 18;
        for (int d = 0; d < count; d++) {
            CK(cudaSetDevice(d));
            float *a, *b2;
            CK(cudaMalloc(&a, m * sizeof(float)));
            CK(cudaMalloc(&b2, m * sizeof(float)));
            CK(cudaMemset(a, 0, m * sizeof(float)));
            for (int i = 0; i < 5 + d; i++) scale<<<(m + 255) / 256, 256>>>(a, m, 1.5f);
            CK(cudaMemcpy(b2, a, m * sizeof(float), cudaMemcpyDeviceToDevice));
            CK(cudaDeviceSynchronize());
        }
        printf("{\"mode\":\"multigpu\",\"devices\":%d}\n", count);
        return 0;
    }
    const int n = 1 << 20;  // 4 MiB of floats
    const size_t bytes = n * sizeof(float);
    float *h, *d0, *d1;
    CK(cudaMallocHost(&h, bytes));
    for (int i = 0; i < n; i++) h[i] = (float)(i % 97) * 0.01f;
    CK(cudaMalloc(&d0, bytes));
    CK(cudaMalloc(&d1, bytes));
    dim3 b(256), g((n + 255) / 256);
    if (!strcmp(mode, "abort") || !strcmp(mode, "segv")) {
        int N = argc > 2 ? atoi(argv[2]) : 1000;
        for (int i = 0; i < N; i++) { scale<<<g, b>>>(d0, n, 1.0001f); if (i % 100 == 99) CK(cudaDeviceSynchronize()); }
        CK(cudaDeviceSynchronize());
        usleep(800 * 1000);  // several flush periods: everything so far reaches the spool
        for (int i = 0; i < 50; i++) add1<<<g, b>>>(d0, n);
        CK(cudaDeviceSynchronize());
        printf("{\"mode\":\"%s\",\"launched_before_pause\":%d,\"launched_total\":%d}\n", mode, N, N + 50);
        fflush(stdout);
        if (!strcmp(mode, "abort")) abort();
        volatile int* p = nullptr; *p = 1;
        return 0;
    }
    cudaStream_t s; CK(cudaStreamCreate(&s));
    CK(cudaMemcpyAsync(d0, h, bytes, cudaMemcpyHostToDevice, s));                 // HtoD 4 MiB
    nvtxRangePushA("phase_a");
    for (int i = 0; i < 10; i++) scale<<<g, b, 0, s>>>(d0, n, 1.01f);             // 10 kernels
    nvtxRangePop();
    CK(cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, s));              // DtoD 4 MiB
    CK(cudaMemsetAsync(d1, 0, bytes / 2, s));                                      // memset 2 MiB
    CK(cudaMemcpyAsync(h, d0, bytes / 4, cudaMemcpyDeviceToHost, s));             // DtoH 1 MiB
    CK(cudaStreamSynchronize(s));
    // A graph of three kernels, replayed five times.
    cudaGraph_t graph; cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    g1<<<g, b, 0, s>>>(d0, n); g2<<<g, b, 0, s>>>(d0, n); g3<<<g, b, 0, s>>>(d0, n);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(exec, s));                     // 15 kernels
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStart());
    for (int i = 0; i < 7; i++) inner<<<g, b, 0, s>>>(d0, n);                    // 7 kernels in range
    CK(cudaStreamSynchronize(s));
    CK(cudaProfilerStop());
    for (int i = 0; i < 4; i++) add1<<<g, b, 0, s>>>(d0, n);                     // 4 kernels after
    CK(cudaStreamSynchronize(s));
    printf("{\"mode\":\"normal\",\"kernels\":36,\"graph_kernels\":15,\"graph_nodes\":3,\"in_profiler_range\":7,"
           "\"htod_bytes\":%zu,\"dtod_bytes\":%zu,\"memset_bytes\":%zu,\"dtoh_bytes\":%zu,\"nvtx\":[\"phase_a\"]}\n",
           bytes, bytes, bytes / 2, bytes / 4);
    return 0;
}
