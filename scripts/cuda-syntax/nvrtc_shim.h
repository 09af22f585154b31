// Declarations that NVRTC provides built in, so clang can syntax-check kernels/cuda/*.cu on a
// machine with no CUDA toolkit (scripts/check-cuda-syntax.sh). Never compiled into gapscope.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline)) inline
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __restrict__ __restrict
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
struct uint4 { unsigned int x, y, z, w; };
struct int4 { int x, y, z, w; };
struct uint2 { unsigned int x, y; };
struct float4 { float x, y, z, w; };
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
__device__ float __uint_as_float(unsigned int);
__device__ unsigned int __float_as_uint(float);
__device__ float __int_as_float(int);
__device__ float __shfl_xor_sync(unsigned int, float, int);
__device__ int __shfl_xor_sync(unsigned int, int, int);
__device__ float fmaxf(float, float);
__device__ float fabsf(float);
__device__ float expf(float);
__device__ float rsqrtf(float);
__device__ float roundf(float);
__device__ float fmaf(float, float, float);
__device__ void sincosf(float, float*, float*);
__device__ int min(int, int);
__device__ void __syncthreads();
template <typename T> __device__ T __ldg(const T*);
#define __align__(n) __attribute__((aligned(n)))
__device__ double __shfl_xor_sync(unsigned int, double, int);
__device__ float __fmul_rn(float, float);
__device__ float __fsub_rn(float, float);
__device__ float __ldcg(const float*);
__device__ int atomicAdd(int*, int);
__device__ void __threadfence();
