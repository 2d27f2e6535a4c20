// PKV_HOST_DEVICE: a function of a plan header that the host planner, its unit tests (plain C++)
// and the CUDA kernels all call: __host__ __device__ under nvcc, inline elsewhere.
#pragma once

#ifndef PKV_HOST_DEVICE
#if defined(__CUDACC__)
#define PKV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PKV_HOST_DEVICE inline
#endif
#endif
