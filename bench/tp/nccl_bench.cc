// pkv-tp-bench nccl: the collectives of one tensor-parallel decode step over NCCL, per --tp and
// batch size, timed with CUDA events on every rank's stream (rank 0's median is reported; all
// ranks end together because every collective is a rendezvous).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/tp/tp_bench.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "worker/model/tp_shard.h"
#include "worker/parallel/nccl_communicator.h"
#include "worker/parallel/rank_threads.h"
#include "worker/tools/model_shapes.h"

namespace pkv::tp_bench {
namespace {

struct Dtype {
  ncclDataType_t nccl;
  int bytes;
};

absl::StatusOr<Dtype> ParseDtype(const std::string& name) {
  if (name == "bfloat16") return Dtype{ncclBfloat16, 2};
  if (name == "float16") return Dtype{ncclFloat16, 2};
  if (name == "float32") return Dtype{ncclFloat32, 4};
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype must be bfloat16, float16 or float32, got ", name));
}

// One rank's buffers and stream for the largest batch.
struct RankBuffers {
  cudaStream_t stream = nullptr;
  void* act = nullptr;        // [batch][hidden] dtype, all-reduced in place
  float* logits = nullptr;    // [batch][chunk] this rank's vocab-parallel logits
  float* gathered = nullptr;  // [tp][batch][chunk]
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Enqueues one decode step's collectives: the embedding all-reduce, 2 per layer, the logits
// all-gather.
absl::Status EnqueueStep(NcclCommunicator* comm, const RankBuffers& b, const ModelConfig& c,
                         int32_t batch, Dtype dtype, int32_t chunk) {
  for (int i = 0; i < 2 * c.num_layers + 1; ++i) {
    PKV_RETURN_IF_ERROR(comm->AllReduceSum(b.act, int64_t{batch} * c.hidden_size, dtype.nccl));
  }
  return comm->AllGather(b.logits, int64_t{batch} * chunk, b.gathered);
}

absl::Status TimeRank(NcclCommunicator* comm, const RankBuffers& b, const ModelConfig& c,
                      int32_t batch, Dtype dtype, int32_t chunk, const NcclBenchOptions& o,
                      std::vector<float>* ms) {
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(comm->device()));
  for (int i = 0; i < o.warmup; ++i)
    PKV_RETURN_IF_ERROR(EnqueueStep(comm, b, c, batch, dtype, chunk));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(b.stream));
  for (int i = 0; i < o.iters; ++i) {
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.start, b.stream));
    PKV_RETURN_IF_ERROR(EnqueueStep(comm, b, c, batch, dtype, chunk));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.stop, b.stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(b.stop));
    float t = 0;
    PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, b.start, b.stop));
    ms->push_back(t);
  }
  return comm->CheckAsyncError();
}

absl::Status Allocate(const ModelConfig& c, int tp, int device, int32_t max_batch, Dtype dtype,
                      RankBuffers* b) {
  const int64_t chunk = VocabShardOf(c.vocab_size, tp, 0).chunk;
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->act, int64_t{max_batch} * c.hidden_size * dtype.bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(b->act, 0, int64_t{max_batch} * c.hidden_size * dtype.bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->logits, max_batch * chunk * sizeof(float)));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b->gathered, tp * max_batch * chunk * sizeof(float)));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b->start));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b->stop));
  return absl::OkStatus();
}

void Free(int device, RankBuffers* b) {
  cudaSetDevice(device);
  cudaFree(b->act);
  cudaFree(b->logits);
  cudaFree(b->gathered);
  cudaEventDestroy(b->start);
  cudaEventDestroy(b->stop);
  cudaStreamDestroy(b->stream);
}

absl::Status BenchTp(const NcclBenchOptions& o, const ModelConfig& c, Dtype dtype, int tp) {
  if (tp > static_cast<int>(o.gpus.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp ", tp, " needs ", tp, " GPUs, --gpus lists ", o.gpus.size()));
  }
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(c, tp));
  const std::vector<int> devices(o.gpus.begin(), o.gpus.begin() + tp);
  const int32_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  std::vector<RankBuffers> bufs(tp);
  std::vector<cudaStream_t> streams;
  for (int r = 0; r < tp; ++r) {
    PKV_RETURN_IF_ERROR(Allocate(c, tp, devices[r], max_batch, dtype, &bufs[r]));
    streams.push_back(bufs[r].stream);
  }
  PKV_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<NcclCommunicator>> comms,
                       NcclCommunicator::CreateGroup(devices, streams));
  RankThreads threads(tp);
  const int32_t chunk = VocabShardOf(c.vocab_size, tp, 0).chunk;
  for (int32_t batch : o.batches) {
    std::vector<std::vector<float>> ms(tp);
    PKV_RETURN_IF_ERROR(threads.Run([&](int r) {
      absl::Status s = TimeRank(comms[r].get(), bufs[r], c, batch, dtype, chunk, o, &ms[r]);
      if (!s.ok()) comms[r]->Abort();
      return s;
    }));
    std::vector<float> t = ms[0];
    std::sort(t.begin(), t.end());
    const double step_us = t[t.size() / 2] * 1e3;
    const int n = 2 * c.num_layers + 1;
    const double ar_bytes = static_cast<double>(batch) * c.hidden_size * dtype.bytes;
    // Ring all-reduce moves 2 (tp - 1) / tp of the buffer through each link (NCCL's busBw).
    const double bus_gbps = tp > 1 ? n * ar_bytes * 2.0 * (tp - 1) / tp / (step_us * 1e3) : 0.0;
    std::printf("%d\t%d\t%d\t%d\t%s\t%s\t%.1f\t%.2f\t%.0f\t%.1f\t%.1f\n", tp, batch, c.hidden_size,
                c.num_layers, o.dtype.c_str(), comms[0]->transport().c_str(), step_us,
                step_us / (n + 1), ar_bytes, bus_gbps, t[t.size() * 9 / 10] * 1e3);
    std::fflush(stdout);
  }
  comms.clear();
  for (int r = 0; r < tp; ++r) Free(devices[r], &bufs[r]);
  return absl::OkStatus();
}

}  // namespace

int RunNcclBench(const NcclBenchOptions& o) {
  absl::StatusOr<ModelConfig> c = ModelShapeConfig(o.shape);
  absl::StatusOr<Dtype> dtype = ParseDtype(o.dtype);
  if (!c.ok() || !dtype.ok()) {
    std::fprintf(stderr, "pkv-tp-bench: %s\n",
                 std::string((c.ok() ? dtype.status() : c.status()).message()).c_str());
    return 2;
  }
  std::printf(
      "tp\tbatch\thidden\tlayers\tdtype\ttransport\tcollectives_us_per_step\t"
      "us_per_collective\tallreduce_bytes\tbus_gbps\tcollectives_us_p90\n");
  for (int tp : o.tps) {
    absl::Status st = BenchTp(o, *c, *dtype, tp);
    if (!st.ok()) {
      std::fprintf(stderr, "pkv-tp-bench: tp %d: %s\n", tp, std::string(st.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace pkv::tp_bench
