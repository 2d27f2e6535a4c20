#include "bench/kernels/sm_partition.h"

#include <cuda.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pkv::bench {
namespace {

absl::Status Cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed with CUresult ", static_cast<int>(r)));
}

// The driver API is reached through the runtime's entry-point table, so pkv-bench does not link
// libcuda (it still runs, without this mode, where no driver is installed).
template <typename F>
absl::Status Get(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 13000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
    return absl::UnavailableError(absl::StrCat("driver entry point ", name, " not found"));
  }
  *fn = reinterpret_cast<F>(p);
  return absl::OkStatus();
}

struct Driver {
  decltype(&cuCtxGetCurrent) ctx_get_current;
  decltype(&cuCtxSetCurrent) ctx_set_current;
  decltype(&cuDeviceGet) device_get;
  decltype(&cuDeviceGetDevResource) get_dev_resource;
  decltype(&cuDevSmResourceSplitByCount) split_by_count;
  decltype(&cuDevResourceGenerateDesc) generate_desc;
  decltype(&cuGreenCtxCreate) green_create;
  decltype(&cuCtxFromGreenCtx) ctx_from_green;
  decltype(&cuGreenCtxStreamCreate) green_stream_create;
  decltype(&cuGreenCtxDestroy) green_destroy;

  absl::Status Load() {
    PKV_RETURN_IF_ERROR(Get("cuCtxGetCurrent", &ctx_get_current));
    PKV_RETURN_IF_ERROR(Get("cuCtxSetCurrent", &ctx_set_current));
    PKV_RETURN_IF_ERROR(Get("cuDeviceGet", &device_get));
    PKV_RETURN_IF_ERROR(Get("cuDeviceGetDevResource", &get_dev_resource));
    PKV_RETURN_IF_ERROR(Get("cuDevSmResourceSplitByCount", &split_by_count));
    PKV_RETURN_IF_ERROR(Get("cuDevResourceGenerateDesc", &generate_desc));
    PKV_RETURN_IF_ERROR(Get("cuGreenCtxCreate", &green_create));
    PKV_RETURN_IF_ERROR(Get("cuCtxFromGreenCtx", &ctx_from_green));
    PKV_RETURN_IF_ERROR(Get("cuGreenCtxStreamCreate", &green_stream_create));
    return Get("cuGreenCtxDestroy", &green_destroy);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SmPartition>> SmPartition::Create(int requested) {
  std::unique_ptr<SmPartition> p(new SmPartition());
  PKV_CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // the primary context exists from here on
  int sms = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (requested <= 0 || requested >= sms) {
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&p->stream_, cudaStreamNonBlocking));
    p->sm_count_ = sms;
    return p;
  }
  const absl::Status green = p->TryGreen(requested);
  if (green.ok()) return p;
  p->note_ = std::string(green.message());
  p->mode_ = "capped";
  p->sm_count_ = requested;
  Driver drv;
  if (p->primary_ != nullptr && drv.Load().ok()) {
    drv.ctx_set_current(static_cast<CUcontext>(p->primary_));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&p->stream_, cudaStreamNonBlocking));
  return p;
}

absl::Status SmPartition::TryGreen(int requested) {
  Driver d;
  PKV_RETURN_IF_ERROR(d.Load());
  CUcontext primary = nullptr;
  PKV_RETURN_IF_ERROR(Cu(d.ctx_get_current(&primary), "cuCtxGetCurrent"));
  primary_ = primary;
  CUdevice dev;
  PKV_RETURN_IF_ERROR(Cu(d.device_get(&dev, 0), "cuDeviceGet"));
  CUdevResource all;
  PKV_RETURN_IF_ERROR(
      Cu(d.get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource"));
  // Default split first (co-scheduling aware: multiples of 8 SMs on Hopper); if that cannot
  // give the exact count, ask for independent SMs.
  CUdevResource part{};
  bool have = false;
  for (unsigned flags : {0u, unsigned{CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING}}) {
    CUdevResource got{};
    unsigned n = 1;
    if (d.split_by_count(&got, &n, &all, nullptr, flags, requested) != CUDA_SUCCESS || n < 1) {
      continue;
    }
    if (!have || got.sm.smCount == static_cast<unsigned>(requested)) {
      part = got;
      have = true;
    }
    if (got.sm.smCount == static_cast<unsigned>(requested)) break;
  }
  if (!have) return absl::UnavailableError("cuDevSmResourceSplitByCount found no partition");
  CUdevResourceDesc desc;
  PKV_RETURN_IF_ERROR(Cu(d.generate_desc(&desc, &part, 1), "cuDevResourceGenerateDesc"));
  CUgreenCtx g;
  PKV_RETURN_IF_ERROR(
      Cu(d.green_create(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate"));
  green_ = g;
  CUcontext ctx;
  PKV_RETURN_IF_ERROR(Cu(d.ctx_from_green(&ctx, g), "cuCtxFromGreenCtx"));
  PKV_RETURN_IF_ERROR(Cu(d.ctx_set_current(ctx), "cuCtxSetCurrent"));
  CUstream s;
  PKV_RETURN_IF_ERROR(
      Cu(d.green_stream_create(&s, g, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate"));
  stream_ = reinterpret_cast<cudaStream_t>(s);
  sm_count_ = static_cast<int>(part.sm.smCount);
  mode_ = "green";
  return absl::OkStatus();
}

SmPartition::~SmPartition() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  Driver d;
  if (green_ != nullptr && d.Load().ok()) {
    if (primary_ != nullptr) d.ctx_set_current(static_cast<CUcontext>(primary_));
    d.green_destroy(static_cast<CUgreenCtx>(green_));
  }
}

}  // namespace pkv::bench
