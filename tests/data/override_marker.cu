#if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1940
#define _tl_orig_alignas alignas
#define alignas(N) _tl_orig_alignas((N) <= 64 ? (N) : 64)
#include <cuda.h>
#undef alignas
#define alignas _tl_orig_alignas
#endif
#include <tl_templates/cuda/reduce.h>
#include <tl_templates/cuda/scan.h>
#include <tl_templates/cuda/ldsm.h>
#include <tl_templates/cuda/threadblock_swizzle.h>
#include <tl_templates/cuda/debug.h>
#ifdef ENABLE_BF16
#include <tl_templates/cuda/cuda_bf16_fallbacks.cuh>
#endif

extern "C" __global__ void fill_marker_kernel(float* __restrict__ Out);
extern "C" __global__ void __launch_bounds__(128, 1) fill_marker_kernel(float* __restrict__ Out) {
  Out[((((int)blockIdx.x) * 128) + ((int)threadIdx.x))] = 42.0f; // irtrace override marker: TileLang generates 1.0f here
}

