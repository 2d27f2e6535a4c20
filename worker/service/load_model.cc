#include "worker/service/load_model.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "worker/engine/fault_injecting_backend.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/cpu_kv_cache.h"
#include "worker/model/model_config.h"
#include "worker/model/tp_cpu_backend.h"
#if PKV_HAVE_CUDA
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/fused_bulk.h"
#include "worker/cuda_backend/tp_cuda_backend.h"
#endif

namespace pkv {
namespace {

// The CPU pool's default memory budget: the bytes of 2048 float32 pages of the model, so FP8 KV
// holds 4x the pages (tokens) in the same memory.
constexpr int64_t kDefaultCpuKvBudgetPages = 2048;

int64_t DefaultCpuKvPages(const std::string& model_dir, int32_t page_size, KvCacheDtype dtype) {
  absl::StatusOr<ModelConfig> c = LoadModelConfig(model_dir);
  if (!c.ok()) return kDefaultCpuKvBudgetPages;  // the loader reports the error
  const int64_t budget_bytes =
      kDefaultCpuKvBudgetPages * CpuKvBytesPerPage(c->num_layers, c->num_kv_heads, c->head_dim,
                                                   page_size, KvCacheDtype::kAuto);
  return budget_bytes /
         CpuKvBytesPerPage(c->num_layers, c->num_kv_heads, c->head_dim, page_size, dtype);
}

// --tp / --gpu against the backend that will run. Errors say what to do next.
absl::Status CheckParallelFlags(const WorkerOptions& o, bool use_cuda) {
  if (o.tp < 1) return absl::InvalidArgumentError(absl::StrCat("--tp must be >= 1, got ", o.tp));
  if (!o.tp_devices.empty() && !use_cuda) {
    return absl::InvalidArgumentError(
        "--tp_devices places the ranks of a CUDA worker, but this worker runs on the CPU");
  }
  if (!o.tp_devices.empty() && static_cast<int>(o.tp_devices.size()) != o.tp) {
    return absl::InvalidArgumentError(absl::StrCat("--tp_devices lists ", o.tp_devices.size(),
                                                   " GPU(s), --tp is ", o.tp,
                                                   ": give one GPU per rank"));
  }
  if (!use_cuda && o.gpu >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu ", o.gpu, " selects a GPU for the CUDA backend, but this worker runs on the CPU"));
  }
  return absl::OkStatus();
}

#if PKV_HAVE_CUDA
// The GPU of each tensor-parallel rank: --tp_devices, else --gpu (or 0), --gpu + 1, ...
absl::StatusOr<std::vector<int>> TpDevices(const WorkerOptions& o) {
  if (o.tp_devices.empty()) return ConsecutiveDevices(std::max(0, o.gpu), o.tp);
  std::vector<int> devices;
  for (const std::string& d : o.tp_devices) {
    int v = 0;
    if (!absl::SimpleAtoi(d, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tp_devices: '", d, "' is not a GPU number"));
    }
    devices.push_back(v);
  }
  return devices;
}

// --gpu N: makes device N current on this thread before anything else touches CUDA, so no context
// is created on device 0; the CUDA backend also receives N and sets it on its own threads.
absl::Status SelectGpu(int gpu) {
  if (gpu < 0) return absl::OkStatus();
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  if (gpu >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu ", gpu, " but ", count, " GPU(s) are visible",
                     visible ? absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")") : ""));
  }
  if (cudaError_t e = cudaSetDevice(gpu); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaSetDevice(", gpu, "): ", cudaGetErrorString(e)));
  }
  PKV_LOG(INFO) << "using GPU " << gpu;
  return absl::OkStatus();
}
#endif

// Loads tokenizer + backend for --model/--backend. Errors say what to do next.
absl::StatusOr<std::unique_ptr<ModelBackend>> LoadBackend(const WorkerOptions& o) {
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be auto, cpu or cuda, got '", o.backend, "'"));
  }
  absl::StatusOr<KvCacheDtype> kv_dtype = ParseKvCacheDtype(o.kv_cache_dtype);
  if (!kv_dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_cache_dtype: ", kv_dtype.status().message()));
  }
  bool use_cuda = o.backend == "cuda";
#if PKV_HAVE_CUDA
  if (use_cuda || o.backend == "auto") {
    if (absl::Status s = SelectGpu(o.gpu); !s.ok()) return s;
  }
  if (o.backend == "auto") use_cuda = CudaDeviceUsable();
  if (absl::Status s = CheckParallelFlags(o, use_cuda); !s.ok()) return s;
  if (use_cuda) {
    CudaBackendOptions c;
    c.device = std::max(0, o.gpu);
    c.page_size = o.page_size;
    c.num_kv_pages = o.kv_pages;
    c.kv_memory_fraction = o.kv_memory_fraction;
    c.gpu_memory_limit_bytes = static_cast<int64_t>(o.gpu_memory_limit_gib * 1073741824.0);
    c.kv_cache_dtype = *kv_dtype;
    c.policy_file = o.policy_file;
    c.policy_dir = o.policy_dir;
    c.decode_policy = o.decode_policy;
    c.fused_small_batch = o.fused_small_batch;
    c.fused_max_hidden = o.fused_max_hidden;
    c.fused_wide_max_tokens = o.fused_wide_max_tokens;
    c.fused_prenorm_min_tokens = o.fused_prenorm_min_tokens;
    absl::StatusOr<uint32_t> bulk = ParseFusedBulk(o.fused_gemv_bulk);
    if (!bulk.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fused_gemv_bulk: ", bulk.status().message()));
    }
    c.fused_gemv_bulk = *bulk;
    c.pdl = o.pdl;
    c.gemm_autotune = o.gemm_autotune;
    c.deterministic = o.deterministic;
    c.deterministic_form.split_tiles = o.deterministic_split_tiles;
    c.deterministic_form.pinned_gemm = o.deterministic_pinned_gemm;
    c.max_step_tokens = std::max(1, o.max_batch_tokens);
    c.max_rows = std::max(1, std::min(o.max_running, o.max_batch_tokens));  // as the scheduler
    if (o.tp > 1) {
      if (o.deterministic) {  // the all-reduce's summation order depends on the message size
        return absl::UnimplementedError(
            "--deterministic with --tp > 1 on the CUDA backend is not supported; use --tp 1");
      }
      TpCudaOptions t;  // every rank gets c, kv_cache_dtype included
      t.backend = c;
      t.communicator = o.tp_comm;
      absl::StatusOr<std::vector<int>> devices = TpDevices(o);
      if (!devices.ok()) return devices.status();
      t.devices = *std::move(devices);
      return LoadTpCudaBackend(o.model_dir, t);
    }
    return LoadCudaBackend(o.model_dir, c);
  }
#else
  if (use_cuda) {
    return absl::UnimplementedError("this build has no CUDA backend; use --backend=cpu");
  }
  if (absl::Status s = CheckParallelFlags(o, use_cuda); !s.ok()) return s;
#endif
  const int64_t pages =
      o.kv_pages > 0 ? o.kv_pages : DefaultCpuKvPages(o.model_dir, o.page_size, *kv_dtype);
  if (o.tp > 1) return LoadTpCpuBackend(o.model_dir, o.tp, o.page_size, pages, *kv_dtype);
  return LoadCpuBackend(o.model_dir, o.page_size, pages, *kv_dtype);
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const WorkerOptions& o, const TestFaults& faults) {
  absl::StatusOr<std::unique_ptr<ModelBackend>> backend = LoadBackend(o);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      backend.ok() ? Tokenizer::FromModelDir(o.model_dir)
                   : absl::StatusOr<std::unique_ptr<Tokenizer>>(backend.status());
  if (!backend.ok() || !tokenizer.ok()) {
    const absl::Status& st = backend.ok() ? tokenizer.status() : backend.status();
    return absl::Status(st.code(), absl::StrCat("cannot load the model: ", st.message(),
                                                " (create the demo model with `make model`, or "
                                                "point --model at a Hugging Face "
                                                "Llama/Qwen/Mistral folder)"));
  }
  LoadedModel model;
  model.backend = *std::move(backend);
  model.tokenizer = *std::move(tokenizer);
  const int64_t capacity = model.backend->num_kv_pages() * model.backend->page_size();
  model.max_context =
      o.max_model_len > 0 ? o.max_model_len : model.backend->config().max_position_embeddings;
  // RoPE tables and the model's training stop at max_position_embeddings: a longer limit would be
  // advertised, accepted, and then fail the first batch that crosses it, so refuse it at start.
  const int32_t model_limit = model.backend->config().max_position_embeddings;
  if (model.max_context > model_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_model_len=", model.max_context, " is past the model's max_position_embeddings ",
        model_limit, " (config.json); lower --max_model_len to at most ", model_limit));
  }
  if (model.max_context > capacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("max context ", model.max_context, " tokens does not fit the KV pool of ",
                     model.backend->num_kv_pages(), " pages x ", model.backend->page_size(),
                     " tokens = ", capacity, "; raise --kv_pages or lower --max_model_len"));
  }
  if (faults.any()) {
    model.backend = std::make_unique<FaultInjectingBackend>(std::move(model.backend), faults);
  }
  return model;
}

}  // namespace pkv
