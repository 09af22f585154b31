/* Prints the sizes and field offsets of the CUPTI activity records gapscope-record decodes,
 * from the CUDA toolkit's own cupti_activity.h, for comparison with the offsets the Rust
 * decoder uses (`gapscope-record --print-layout`). Generated from profiler/src/layout.rs by
 * scripts/record/gen-layout-check.py; built and run on the GPU machine by run-gpu.sh. */
#include <stdio.h>
#include <stddef.h>
#include <cupti.h>
#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))
#define S(T) printf("%s.size %zu\n", #T, sizeof(T))
int main(void) {
    uint32_t v = 0; cuptiGetVersion(&v); printf("cupti_api_version %u\n", v);
    printf("CUPTI_API_VERSION %u\n", (unsigned)CUPTI_API_VERSION);
    S(CUpti_ActivityKernel10);
    F(CUpti_ActivityKernel10, registersPerThread);
    F(CUpti_ActivityKernel10, start);
    F(CUpti_ActivityKernel10, end);
    F(CUpti_ActivityKernel10, deviceId);
    F(CUpti_ActivityKernel10, contextId);
    F(CUpti_ActivityKernel10, streamId);
    F(CUpti_ActivityKernel10, gridX);
    F(CUpti_ActivityKernel10, gridY);
    F(CUpti_ActivityKernel10, gridZ);
    F(CUpti_ActivityKernel10, blockX);
    F(CUpti_ActivityKernel10, blockY);
    F(CUpti_ActivityKernel10, blockZ);
    F(CUpti_ActivityKernel10, staticSharedMemory);
    F(CUpti_ActivityKernel10, dynamicSharedMemory);
    F(CUpti_ActivityKernel10, correlationId);
    F(CUpti_ActivityKernel10, name);
    F(CUpti_ActivityKernel10, reserved0);
    F(CUpti_ActivityKernel10, graphNodeId);
    F(CUpti_ActivityKernel10, graphId);
    F(CUpti_ActivityKernel10, pAccessPolicyWindow);
    S(CUpti_ActivityMemcpy6);
    F(CUpti_ActivityMemcpy6, copyKind);
    F(CUpti_ActivityMemcpy6, bytes);
    F(CUpti_ActivityMemcpy6, start);
    F(CUpti_ActivityMemcpy6, end);
    F(CUpti_ActivityMemcpy6, deviceId);
    F(CUpti_ActivityMemcpy6, contextId);
    F(CUpti_ActivityMemcpy6, streamId);
    F(CUpti_ActivityMemcpy6, correlationId);
    F(CUpti_ActivityMemcpy6, reserved0);
    F(CUpti_ActivityMemcpy6, graphNodeId);
    F(CUpti_ActivityMemcpy6, graphId);
    S(CUpti_ActivityMemset4);
    F(CUpti_ActivityMemset4, bytes);
    F(CUpti_ActivityMemset4, start);
    F(CUpti_ActivityMemset4, end);
    F(CUpti_ActivityMemset4, deviceId);
    F(CUpti_ActivityMemset4, contextId);
    F(CUpti_ActivityMemset4, streamId);
    F(CUpti_ActivityMemset4, correlationId);
    F(CUpti_ActivityMemset4, reserved0);
    F(CUpti_ActivityMemset4, graphNodeId);
    F(CUpti_ActivityMemset4, graphId);
    S(CUpti_ActivityAPI);
    F(CUpti_ActivityAPI, cbid);
    F(CUpti_ActivityAPI, start);
    F(CUpti_ActivityAPI, end);
    F(CUpti_ActivityAPI, processId);
    F(CUpti_ActivityAPI, threadId);
    F(CUpti_ActivityAPI, correlationId);
    F(CUpti_ActivityAPI, returnValue);
    S(CUpti_ActivityMarker2);
    F(CUpti_ActivityMarker2, flags);
    F(CUpti_ActivityMarker2, timestamp);
    F(CUpti_ActivityMarker2, id);
    F(CUpti_ActivityMarker2, objectKind);
    F(CUpti_ActivityMarker2, objectId);
    F(CUpti_ActivityMarker2, name);
    F(CUpti_ActivityMarker2, domain);
    S(CUpti_ActivityOverhead3);
    F(CUpti_ActivityOverhead3, overheadKind);
    F(CUpti_ActivityOverhead3, start);
    F(CUpti_ActivityOverhead3, end);
    F(CUpti_ActivityOverhead3, overheadData);
    S(CUpti_ActivityDevice5);
    F(CUpti_ActivityDevice5, globalMemoryBandwidth);
    F(CUpti_ActivityDevice5, globalMemorySize);
    F(CUpti_ActivityDevice5, l2CacheSize);
    F(CUpti_ActivityDevice5, coreClockRate);
    F(CUpti_ActivityDevice5, numMultiprocessors);
    F(CUpti_ActivityDevice5, computeCapabilityMajor);
    F(CUpti_ActivityDevice5, computeCapabilityMinor);
    F(CUpti_ActivityDevice5, id);
    F(CUpti_ActivityDevice5, uuid);
    F(CUpti_ActivityDevice5, name);
    return 0;
}
