// Runs one function on every rank of a tensor-parallel group at once and waits for all of them:
// the fan-out/join that keeps the ranks of one worker in lockstep. Rank 0 runs on the calling
// thread (the engine's scheduler thread), ranks 1..N-1 on threads owned here that sleep on a
// condition variable between runs, so a step costs two hand-offs per rank and no thread creation.
//
// Each run returns the first non-OK status of the ranks, in rank order. A rank that fails should
// abort its communicator group first (communicator.h) so ranks waiting in a collective return.
// Thread-safety: Run() is called by one thread at a time (the backend's owner).
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace pkv {

class RankThreads {
 public:
  // REQUIRES: world_size >= 1. Starts world_size - 1 threads.
  explicit RankThreads(int world_size);
  ~RankThreads();  // stops and joins the threads
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int world_size() const { return world_size_; }

  // Calls fn(r) for every rank r in [0, world_size) concurrently; returns when all have returned.
  absl::Status Run(absl::FunctionRef<absl::Status(int rank)> fn);

 private:
  void Loop(int rank);

  const int world_size_;
  std::vector<std::thread> threads_;  // [world_size - 1], thread i runs rank i + 1

  absl::Mutex mu_;
  absl::CondVar start_cv_;  // a new run (or stop) was posted
  absl::CondVar done_cv_;   // the last helper rank finished the run
  uint64_t run_id_ ABSL_GUARDED_BY(mu_) = 0;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // helper ranks still running the current run
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  const absl::FunctionRef<absl::Status(int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<absl::Status> results_;  // [world_size]; slot r written by rank r only
};

}  // namespace pkv
