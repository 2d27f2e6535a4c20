// The backend's device and its CUDA stream: made current and created together at load, the stream
// synchronised and destroyed with the owner. Every launch and copy of one backend (one rank) goes
// on this one stream, so its order is the order of the enqueue calls. Move-only.
// Thread-safety: a plain owner; the thread that runs the backend's steps uses the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/statusor.h"
#include "common/cuda_status.h"

namespace pkv::cuda_backend {

class DeviceStream {
 public:
  DeviceStream() = default;
  ~DeviceStream() { Reset(); }
  DeviceStream(DeviceStream&& o) noexcept
      : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  DeviceStream& operator=(DeviceStream&& o) noexcept {
    if (this != &o) {
      Reset();
      device_ = o.device_;
      stream_ = std::exchange(o.stream_, nullptr);
    }
    return *this;
  }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  // Makes `device` current and creates a non-blocking stream on it.
  static absl::StatusOr<DeviceStream> Create(int device) {
    DeviceStream d;
    d.device_ = device;
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&d.stream_, cudaStreamNonBlocking));
    return d;
  }

  int device() const { return device_; }
  cudaStream_t get() const { return stream_; }
  // Waits for everything enqueued so far (teardown: before the buffers it reads are freed).
  void Synchronize() const {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  }

 private:
  void Reset() {
    if (stream_ == nullptr) return;
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

// An event without timing (what a host waits on for one point of a stream), created on first use.
class DeviceEvent {
 public:
  DeviceEvent() = default;
  ~DeviceEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;

  // Marks the stream's current end (the device current).
  absl::Status Record(cudaStream_t stream) {
    if (event_ == nullptr) {
      PKV_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    }
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
    return absl::OkStatus();
  }
  // Blocks until the stream has run past the recorded point.
  absl::Status Wait() const {
    PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
    return absl::OkStatus();
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace pkv::cuda_backend
