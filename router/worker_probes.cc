// WorkerRegistry's probes: async health Check, GetLoad and GetModelInfo calls and the state
// transitions their answers drive. Split from worker_registry.cc to keep each file small.
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "router/worker_registry.h"

namespace pkv::router {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// ModelInfo is read once per healthy transition; a slow answer (a model still warming up) is fine.
constexpr absl::Duration kModelInfoTimeout = absl::Seconds(2);

template <typename Request, typename Response>
struct TypedProbe : internal::RegistryProbe {
  Request request;
  Response response;
};

template <typename Request, typename Response>
std::shared_ptr<TypedProbe<Request, Response>> NewProbe(absl::Duration timeout) {
  auto probe = std::make_shared<TypedProbe<Request, Response>>();
  probe->ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return probe;
}

bool UsableModel(const pkv::v1::ModelInfo& model) {
  return model.vocab_size() > 0 && model.max_context() >= 2;
}

}  // namespace

void WorkerRegistry::ProbeHealth(int w) {
  Worker& worker = *workers_[w];
  auto probe = NewProbe<HealthCheckRequest, HealthCheckResponse>(
      absl::Milliseconds(options_.health_timeout_ms));
  probe->request.set_service(options_.worker_health_service);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || worker.check_pending) return;
    worker.check_pending = true;
    probes_.emplace(probe.get(), probe);
  }
  worker.health->async()->Check(&probe->ctx, &probe->request, &probe->response,
                                [this, w, probe](grpc::Status status) {
                                  OnCheckDone(w, status, probe->response.status());
                                  Unregister(probe.get());
                                });
}

void WorkerRegistry::ProbeLoad(int w) {
  Worker& worker = *workers_[w];
  auto probe = NewProbe<pkv::v1::GetLoadRequest, pkv::v1::Load>(
      absl::Milliseconds(std::max(options_.load_interval_ms, options_.health_timeout_ms)));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || worker.load_pending || !worker.serving) return;
    worker.load_pending = true;
    probes_.emplace(probe.get(), probe);
  }
  worker.stub->async()->GetLoad(&probe->ctx, &probe->request, &probe->response,
                                [this, w, probe](grpc::Status status) {
                                  OnLoadDone(w, status, probe->response);
                                  Unregister(probe.get());
                                });
}

void WorkerRegistry::FetchModelInfo(int w) {
  Worker& worker = *workers_[w];
  auto probe = NewProbe<pkv::v1::GetModelInfoRequest, pkv::v1::ModelInfo>(kModelInfoTimeout);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      worker.model_pending = false;
      return;
    }
    probes_.emplace(probe.get(), probe);
  }
  worker.stub->async()->GetModelInfo(&probe->ctx, &probe->request, &probe->response,
                                     [this, w, probe](grpc::Status status) {
                                       OnModelInfoDone(w, status, probe->response);
                                       Unregister(probe.get());
                                     });
}

void WorkerRegistry::Unregister(internal::RegistryProbe* probe) {
  absl::MutexLock lock(&mu_);
  probes_.erase(probe);
}

void WorkerRegistry::MarkNotServingLocked(Worker& worker) {
  worker.serving = false;
  worker.model.reset();  // re-read on the next healthy transition (the worker may restart)
}

void WorkerRegistry::OnCheckDone(int w, const grpc::Status& status,
                                 HealthCheckResponse::ServingStatus serving) {
  Worker& worker = *workers_[w];
  bool fetch_model = false;
  bool was_healthy = false, is_healthy = false;
  std::string why;  // set once per outage, when the worker stops counting as serving
  {
    absl::MutexLock lock(&mu_);
    worker.check_pending = false;
    was_healthy = HealthyLocked(worker);
    if (status.ok() && serving == HealthCheckResponse::SERVING) {
      worker.failed_checks = 0;
      worker.serving = true;
    } else if (status.ok()) {
      if (worker.serving) {
        why = absl::StrCat("health status ", HealthCheckResponse::ServingStatus_Name(serving));
      }
      MarkNotServingLocked(worker);
    } else if (++worker.failed_checks == options_.unhealthy_threshold) {
      // Also reached by a worker that never came up: say once why it is not being used.
      why = absl::StrCat(worker.failed_checks, " failed health checks of '",
                         options_.worker_health_service, "', last: ", status.error_message(),
                         " (code ", status.error_code(), ")");
      MarkNotServingLocked(worker);
    }
    if (worker.serving && !worker.model.has_value() && !worker.model_pending) {
      worker.model_pending = fetch_model = true;
    }
    is_healthy = HealthyLocked(worker);
  }
  if (fetch_model) FetchModelInfo(w);
  if (!why.empty()) {
    PKV_LOG(WARNING) << "worker " << worker.address << " unhealthy: " << why;
  }
  if (was_healthy != is_healthy) NotifyChange();
}

void WorkerRegistry::OnLoadDone(int w, const grpc::Status& status, const pkv::v1::Load& load) {
  if (!status.ok()) {  // health checks decide; a failed poll keeps the last known load
    absl::MutexLock lock(&mu_);
    workers_[w]->load_pending = false;
    return;
  }
  Worker& worker = *workers_[w];
  bool was_healthy = false, is_healthy = false;
  {
    absl::MutexLock lock(&mu_);
    worker.load_pending = false;
    was_healthy = HealthyLocked(worker);
    worker.reported_load = static_cast<uint64_t>(load.running()) + load.waiting();
    worker.draining = load.draining();
    if (!load.worker_id().empty()) worker.worker_id = load.worker_id();
    is_healthy = HealthyLocked(worker);
  }
  if (was_healthy && !is_healthy) {
    PKV_LOG(INFO) << "worker " << worker.address << " is draining; no new placements";
  }
  if (was_healthy != is_healthy) NotifyChange();
}

void WorkerRegistry::OnModelInfoDone(int w, const grpc::Status& status,
                                     const pkv::v1::ModelInfo& model) {
  Worker& worker = *workers_[w];
  bool became_healthy = false;
  {
    absl::MutexLock lock(&mu_);
    worker.model_pending = false;
    if (status.ok() && UsableModel(model) && worker.serving) {
      worker.model = model;
      became_healthy = HealthyLocked(worker);
    }
  }
  if (!status.ok()) {
    PKV_LOG(WARNING) << "worker " << worker.address
                     << ": GetModelInfo failed: " << status.error_message();
  } else if (!UsableModel(model)) {
    PKV_LOG(WARNING) << "worker " << worker.address << " reported an unusable model (vocab_size "
                     << model.vocab_size() << ", max_context " << model.max_context() << ")";
  }
  if (became_healthy) {
    PKV_LOG(INFO) << "worker " << worker.address << " healthy: model " << model.model_name()
                  << ", vocab " << model.vocab_size() << ", max_context " << model.max_context()
                  << ", backend " << model.backend();
    NotifyChange();
  }
}

}  // namespace pkv::router
