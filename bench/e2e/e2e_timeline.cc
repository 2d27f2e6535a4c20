#include "bench/e2e/e2e_timeline.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace pkv::bench {

using gpu::TimelineRecord;

absl::StatusOr<StepTimeline> StepTimeline::Start() {
  constexpr int64_t kBytes = gpu::kTimelineRecords * sizeof(TimelineRecord);
  PKV_ASSIGN_OR_RETURN(cuda_backend::DeviceBuffer records,
                       cuda_backend::DeviceBuffer::Allocate(kBytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(records.get(), 0, kBytes));
  bool built = false;
  PKV_CUDA_RETURN_IF_ERROR(gpu::ArmTimeline(static_cast<TimelineRecord*>(records.get()), &built));
  if (!built) {
    return absl::FailedPreconditionError(
        "--timeline_dir needs a timeline build: configure with -DPKV_TIMELINE=ON "
        "(bench/device/bundle.sh --variant \"tl:-DPKV_TIMELINE=ON\")");
  }
  return StepTimeline(std::move(records));
}

absl::Status StepTimeline::Clear() {
  PKV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemset(records_.get(), 0, gpu::kTimelineRecords * sizeof(TimelineRecord)));
  PKV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return absl::OkStatus();
}

absl::Status StepTimeline::Write(const std::string& path) {
  PKV_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  bool built = false;
  PKV_CUDA_RETURN_IF_ERROR(gpu::ArmTimeline(nullptr, &built));
  std::vector<TimelineRecord> all(gpu::kTimelineRecords);
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpy(all.data(), records_.get(),
                                      all.size() * sizeof(TimelineRecord), cudaMemcpyDeviceToHost));
  std::vector<TimelineRecord> used;
  uint64_t t0 = std::numeric_limits<uint64_t>::max();
  for (const TimelineRecord& r : all) {
    if (r.grid_id == 0) continue;
    used.push_back(r);
    t0 = std::min(t0, r.t_wait);
  }
  std::sort(used.begin(), used.end(), [](const TimelineRecord& a, const TimelineRecord& b) {
    return a.t_go != b.t_go ? a.t_go < b.t_go : a.cta < b.cta;
  });
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  std::fprintf(f, "grid_id\tcta\tgrid\tthreads\tsm\tt_wait_ns\tt_go_ns\tt_exit_ns\n");
  for (const TimelineRecord& r : used) {
    const long long exit = r.t_exit >= t0 ? static_cast<long long>(r.t_exit - t0) : -1;
    std::fprintf(f, "%llu\t%u\t%u\t%u\t%u\t%llu\t%llu\t%lld\n",
                 static_cast<unsigned long long>(r.grid_id), r.cta, r.grid, r.threads, r.sm,
                 static_cast<unsigned long long>(r.t_wait - t0),
                 static_cast<unsigned long long>(r.t_go - t0), exit);
  }
  std::fclose(f);
  std::printf("timeline: %zu CTA records of one step -> %s\n", used.size(), path.c_str());
  return absl::OkStatus();
}

}  // namespace pkv::bench
