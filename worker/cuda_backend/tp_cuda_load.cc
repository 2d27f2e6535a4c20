// TpCudaBackend's loading: device-list and communicator checks, each rank's one-GPU backend with
// its weight shard, the communicator group, the hooks, the KV pools (one page count for every
// rank) and the full-vocabulary step builder.
#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/tp_cuda_ranks.h"
#include "worker/model/checkpoint.h"
#include "worker/model/kv_cache_scales.h"
#include "worker/model/tp_shard.h"

namespace pkv {
namespace {

using Impl = CudaModelBackend::Impl;

// Whether the ranks share one device (SharedDeviceGroup) rather than one GPU each (NCCL); the
// error says which device lists and communicators work.
absl::StatusOr<bool> ChooseSharedDevice(const TpCudaOptions& o) {
  const int tp = static_cast<int>(o.devices.size());
  if (tp < 1 || tp > kMaxTensorParallel) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallelism needs 1 to ", kMaxTensorParallel, " devices, got ", tp));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  for (int d : o.devices) {
    if (d < 0 || d >= count) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      return absl::InvalidArgumentError(
          absl::StrCat("tensor-parallel devices ", absl::StrJoin(o.devices, ","), ": GPU ", d,
                       " but ", count, " GPU(s) are visible",
                       visible ? absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")") : "",
                       "; --tp_devices with one GPU repeated (0,0,...) puts every rank on it"));
    }
  }
  const bool same =
      std::all_of(o.devices.begin(), o.devices.end(), [&](int d) { return d == o.devices[0]; });
  const bool distinct =
      std::set<int>(o.devices.begin(), o.devices.end()).size() == o.devices.size();
  const std::string list = absl::StrJoin(o.devices, ",");
  if (o.communicator != "auto" && o.communicator != "nccl" && o.communicator != "shared") {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel communicator '", o.communicator,
                                                   "' is not one of auto, nccl, shared"));
  }
  if (!same && !distinct) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor-parallel devices ", list,
        ": ranks must be on distinct GPUs (NCCL) or all on one GPU (shared-device group)"));
  }
  const bool shared = o.communicator == "shared" || (o.communicator == "auto" && same);
  if (shared && !same) {
    return absl::InvalidArgumentError(
        absl::StrCat("the shared-device communicator needs every rank on one GPU, got ", list));
  }
  if (shared && tp > SharedDeviceGroup::kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", SharedDeviceGroup::kMaxRanks,
                                                   " ranks can share one GPU, got ", tp));
  }
  if (!shared && !distinct) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL needs one rank per GPU (it refuses two ranks on one device), got ", list));
  }
#if !PKV_HAVE_NCCL
  if (!shared) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor parallelism over GPUs ", list,
        " needs NCCL, which this build lacks; rebuild with NCCL, or share one GPU (--tp_devices)"));
  }
#endif
  return shared;
}

// The elements of a checkpoint tensor a shard spec selects (device_weights.h).
cuda_backend::TensorRuns RunsOf(const TensorShardSpec& s) {
  int64_t numel = 1;
  for (int64_t d : s.full_shape) numel *= d;
  if (s.split_dim < 0) return {0, 0, 1, numel};
  if (s.split_dim == 0) {
    const int64_t inner = numel / s.full_shape[0];
    return {s.begin * inner, 0, 1, (s.end - s.begin) * inner};
  }
  return {s.begin, s.full_shape[1], s.full_shape[0], s.end - s.begin};  // one run per row
}

absl::Status StartRanks(const CudaBackendOptions& o, TpCudaBackend::Ranks* ranks) {
  for (int r = 0; r < ranks->tp(); ++r) {
    CudaBackendOptions ro = o;
    ro.device = ranks->devices[r];
    ro.fused_small_batch = false;  // the fused GEMV path is not sharded (one-GPU only)
    PKV_ASSIGN_OR_RETURN(ranks->impls[r], Impl::Start(ro));
  }
  return absl::OkStatus();
}

absl::Status CreateCommunicators(bool shared, TpCudaBackend::Ranks* ranks) {
  std::vector<cudaStream_t> streams;
  for (const auto& m : ranks->impls) streams.push_back(m->stream());
  if (shared) {
    PKV_ASSIGN_OR_RETURN(ranks->shared, SharedDeviceGroup::Create(ranks->devices[0], streams));
    for (int r = 0; r < ranks->tp(); ++r) ranks->comms[r] = ranks->shared->rank(r);
    return absl::OkStatus();
  }
#if PKV_HAVE_NCCL
  PKV_ASSIGN_OR_RETURN(ranks->nccl, NcclCommunicator::CreateGroup(ranks->devices, streams));
  for (int r = 0; r < ranks->tp(); ++r) ranks->comms[r] = ranks->nccl[r].get();
  return absl::OkStatus();
#else
  return absl::UnimplementedError("this build has no NCCL");
#endif
}

// Rank 0 sizes the KV pool (its share of its device's free memory) and every rank gets as many
// pages: a page id names the same tokens on every rank.
absl::Status FinishRanks(const ModelConfig& config, const std::string& source,
                         TpCudaBackend::Ranks* ranks) {
  const int tp = ranks->tp();
  for (int r = 0; r < tp; ++r) {  // before the KV pools take the free memory
    PKV_ASSIGN_OR_RETURN(ranks->hooks[r],
                         cuda_backend::TpRankHooks::Create(
                             ranks->comms[r], config, ranks->impls[r]->options().max_rows, r == 0));
  }
  const int sharing =
      static_cast<int>(std::count(ranks->devices.begin(), ranks->devices.end(), ranks->devices[0]));
  ranks->impls[0]->ShareKvMemory(sharing);
  for (int r = 0; r < tp; ++r) {
    Impl& m = *ranks->impls[r];
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(ranks->devices[r]));
    if (r > 0) m.SetKvPages(ranks->impls[0]->kv().num_pages());
    PKV_RETURN_IF_ERROR(m.Finish(absl::StrCat(source, ", tensor-parallel rank ", r, " of ", tp,
                                              " on GPU ", ranks->devices[r])));
    if (m.kv().num_pages() != ranks->impls[0]->kv().num_pages()) {
      return absl::ResourceExhaustedError(absl::StrCat("rank ", r, " fits ", m.kv().num_pages(),
                                                       " KV pages, rank 0 has ",
                                                       ranks->impls[0]->kv().num_pages()));
    }
    // The all-gather sends [rows][chunk] from the LM head's output, chunk >= the local vocab.
    PKV_RETURN_IF_ERROR(
        m.AttachTensorParallel(ranks->hooks[r].get(), ranks->hooks[r]->logits_floats()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TpCudaBackend>> TpCudaBackend::Load(const std::string& model_dir,
                                                                   const TpCudaOptions& options) {
  PKV_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  const int tp = static_cast<int>(options.devices.size());
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  PKV_ASSIGN_OR_RETURN(const bool shared, ChooseSharedDevice(options));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  PKV_RETURN_IF_ERROR(ValidateLlamaCheckpoint(config, *checkpoint));
  PKV_ASSIGN_OR_RETURN(decode::DType dtype,
                       cuda_backend::ChooseComputeDType(options.backend.dtype, *checkpoint));
  std::vector<Fp8KvScales> kv_scales;  // the same scales as the one-GPU and CPU backends
  if (options.backend.kv_cache_dtype != KvCacheDtype::kAuto) {
    PKV_ASSIGN_OR_RETURN(kv_scales, LoadKvCacheScales(*checkpoint, config.num_layers));
  }
  std::unique_ptr<TpCudaBackend> b(new TpCudaBackend(config, options));
  Ranks& ranks = *b->ranks_;
  PKV_RETURN_IF_ERROR(StartRanks(options.backend, &ranks));
  // Each rank reads only its slices of the (memory-mapped) checkpoint, all ranks at once.
  PKV_RETURN_IF_ERROR(ranks.threads->Run([&](int r) -> absl::Status {
    Impl& m = *ranks.impls[r];
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(ranks.devices[r]));
    const ModelConfig shard = ShardConfig(config, tp, r);
    const std::vector<TensorShardSpec> specs = TensorShardSpecs(config, tp, r);
    auto spec_of = [&specs](const std::string& name) -> const TensorShardSpec* {
      for (const TensorShardSpec& s : specs) {
        if (s.name == name) return &s;
      }
      return nullptr;
    };
    auto runs_of = [&](const std::string& name) {
      const TensorShardSpec* s = spec_of(name);
      // Not part of the shard: zero elements, which fails the size check.
      return s != nullptr ? RunsOf(*s) : cuda_backend::TensorRuns{0, 0, 0, 0};
    };
    // The CPU ranks' shard rule: rows of column-parallel, whole groups of row-parallel modules.
    auto quantized_of = [&](const std::string& module) -> absl::StatusOr<QuantizedLinear> {
      const TensorShardSpec* s = spec_of(module + ".weight");
      if (s == nullptr) return absl::InternalError(absl::StrCat(module, ": not in the shard"));
      return LoadQuantizedShard(config.quant, *checkpoint, module, *s);
    };
    absl::StatusOr<cuda_backend::DeviceWeights> weights = cuda_backend::UploadWeightRuns(
        shard, *checkpoint, runs_of, quantized_of, dtype, m.stream());
    if (!weights.ok()) {  // sizes in the message are the rank's (1/tp of the split dimension)
      return absl::Status(weights.status().code(),
                          absl::StrCat("tensor-parallel rank ", r, " of ", tp, ": ",
                                       absl::string_view(weights.status().message())));
    }
    m.SetModel(shard, *std::move(weights));
    // A layer's scale covers all its heads, so every rank takes the whole model's scales.
    m.SetKvCacheScales(kv_scales);
    return absl::OkStatus();
  }));
  checkpoint.reset();  // unmaps the files
  PKV_RETURN_IF_ERROR(b->Finish(shared, model_dir));
  return b;
}

absl::StatusOr<std::unique_ptr<TpCudaBackend>> TpCudaBackend::LoadRandom(
    const ModelConfig& config, uint64_t seed, const TpCudaOptions& options) {
  const int tp = static_cast<int>(options.devices.size());
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  PKV_ASSIGN_OR_RETURN(const bool shared, ChooseSharedDevice(options));
  const decode::DType dtype =
      options.backend.dtype == "float16" ? decode::DType::kFloat16 : decode::DType::kBFloat16;
  std::unique_ptr<TpCudaBackend> b(new TpCudaBackend(config, options));
  Ranks& ranks = *b->ranks_;
  PKV_RETURN_IF_ERROR(StartRanks(options.backend, &ranks));
  for (int r = 0; r < tp; ++r) {
    Impl& m = *ranks.impls[r];
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(ranks.devices[r]));
    const ModelConfig shard = ShardConfig(config, tp, r);
    PKV_ASSIGN_OR_RETURN(
        cuda_backend::DeviceWeights weights,
        cuda_backend::RandomDeviceWeights(shard, dtype, seed + 7919 * uint64_t(r), m.stream()));
    m.SetModel(shard, std::move(weights));
  }
  PKV_RETURN_IF_ERROR(b->Finish(shared, absl::StrCat("random weights (seed ", seed, ")")));
  return b;
}

absl::Status TpCudaBackend::Finish(bool shared, const std::string& source) {
  Ranks& ranks = *ranks_;
  PKV_RETURN_IF_ERROR(CreateCommunicators(shared, &ranks));
  PKV_RETURN_IF_ERROR(FinishRanks(config_, source, &ranks));
  // Validates against the whole vocabulary, not rank 0's slice.
  ranks.builder = ranks.impls[0]->NewStepBuilder(config_);
  num_kv_pages_ = ranks.impls[0]->kv().num_pages();
  SetCudaGraphs(options_.backend.cuda_graphs);
  const ModelConfig& local = ranks.impls[0]->config();
  PKV_LOG(INFO) << "cuda backend, tensor parallel " << tp() << " over GPU(s) "
                << absl::StrJoin(devices_, ",") << " via " << transport() << ": per rank "
                << local.num_q_heads << "/" << local.num_kv_heads << " q/KV heads, "
                << local.intermediate_size << " intermediate, " << local.vocab_size
                << " vocabulary rows, " << rank_weight_bytes() / 1048576.0 << " MiB weights, "
                << num_kv_pages_ << " KV pages of " << KvCacheDtypeName(kv_cache_dtype()) << " ("
                << rank_kv_bytes() / 1048576.0 << " MiB)"
                << (config_.quant.quantized()
                        ? absl::StrCat(", ", std::string(QuantMethodName(config_.quant.method)),
                                       " weights packed per rank")
                        : std::string())
                << "; CUDA graphs "
                << (cuda_graphs() ? "on (collectives captured)"
                                  : (shared && options_.backend.cuda_graphs
                                         ? "off (the shared-device communicator is not capturable)"
                                         : "off"))
                << "; fused small-batch path off (one-GPU only)";
  return absl::OkStatus();
}

}  // namespace pkv
