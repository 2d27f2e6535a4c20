// WorkerRegistry's probes: async health Check, GetLoad and GetModelInfo calls and the state
// transitions their answers drive (circuit breaker included). Split from worker_registry.cc to
// keep each file small. Every callback carries the slot generation it was issued for.
#include <algorithm>
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
// The least time a worker reported lost has to answer the verifying health check.
constexpr absl::Duration kVerifyTimeout = absl::Seconds(1);

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

void WorkerRegistry::ProbeHealth(int w, bool regular) {
  auto probe = NewProbe<HealthCheckRequest, HealthCheckResponse>(options_.health_timeout);
  probe->request.set_service(options_.worker_health_service);
  std::shared_ptr<grpc::health::v1::Health::Stub> health;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (stopping_ || worker.removed || worker.check_pending || worker.health == nullptr) return;
    if (worker.breaker.closed() ? !regular : !worker.breaker.AllowProbe(absl::Now())) return;
    worker.check_pending = true;
    health = worker.health;
    generation = worker.generation;
    probes_.emplace(probe.get(), probe);
  }
  health->async()->Check(&probe->ctx, &probe->request, &probe->response,
                         [this, w, generation, probe, health](grpc::Status status) {
                           OnCheckDone(w, generation, status, probe->response.status());
                           Unregister(probe.get());
                         });
}

void WorkerRegistry::ProbeLoad(int w) {
  auto probe = NewProbe<pkv::v1::GetLoadRequest, pkv::v1::Load>(
      std::max(options_.load_interval, options_.health_timeout));
  StubPtr stub;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (stopping_ || worker.removed || worker.load_pending || !worker.serving) return;
    worker.load_pending = true;
    stub = worker.stub;
    generation = worker.generation;
    probes_.emplace(probe.get(), probe);
  }
  stub->async()->GetLoad(&probe->ctx, &probe->request, &probe->response,
                         [this, w, generation, probe, stub](grpc::Status status) {
                           OnLoadDone(w, generation, status, probe->response);
                           Unregister(probe.get());
                         });
}

void WorkerRegistry::FetchModelInfo(int w, uint64_t generation) {
  auto probe = NewProbe<pkv::v1::GetModelInfoRequest, pkv::v1::ModelInfo>(kModelInfoTimeout);
  StubPtr stub;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (stopping_ || worker.generation != generation || worker.stub == nullptr) {
      if (worker.generation == generation) worker.model_pending = false;
      return;
    }
    stub = worker.stub;
    probes_.emplace(probe.get(), probe);
  }
  stub->async()->GetModelInfo(&probe->ctx, &probe->request, &probe->response,
                              [this, w, generation, probe, stub](grpc::Status status) {
                                OnModelInfoDone(w, generation, status, probe->response);
                                Unregister(probe.get());
                              });
}

void WorkerRegistry::VerifyLost(int w, uint64_t generation, std::string why) {
  // Long enough that a router just back from a pause or starvation reads the answer in time.
  auto probe = NewProbe<HealthCheckRequest, HealthCheckResponse>(
      std::max(kVerifyTimeout, 2 * options_.health_timeout));
  probe->request.set_service(options_.worker_health_service);
  std::shared_ptr<grpc::health::v1::Health::Stub> health;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (stopping_ || worker.generation != generation || worker.health == nullptr) {
      if (worker.generation == generation) worker.suspect = false;
      return;
    }
    health = worker.health;
    probes_.emplace(probe.get(), probe);
  }
  health->async()->Check(&probe->ctx, &probe->request, &probe->response,
                         [this, w, generation, probe, health, why](grpc::Status status) {
                           OnVerifyDone(w, generation, status, probe->response.status(), why);
                           Unregister(probe.get());
                         });
}

void WorkerRegistry::OnVerifyDone(int w, uint64_t generation, const grpc::Status& status,
                                  HealthCheckResponse::ServingStatus serving,
                                  const std::string& why) {
  bool was_healthy = false, is_healthy = false, ejected = false;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (worker.generation != generation) return;
    address = worker.address;
    was_healthy = HealthyLocked(worker);
    worker.suspect = false;
    if (!status.ok()) {
      if (worker.breaker.closed()) ejected = TripLocked(worker);
      worker.logged_down = true;
    } else if (serving != HealthCheckResponse::SERVING) {
      MarkNotServingLocked(worker);
    }
    is_healthy = HealthyLocked(worker);
  }
  if (ejected) {
    PKV_LOG(WARNING) << "worker " << address << " ejected: " << why
                     << "; its health check failed too: " << status.error_message();
  } else if (status.ok()) {
    PKV_LOG(INFO) << "worker " << address << " answered its health check after a stream reported "
                  << why << "; not ejected";
  }
  if (was_healthy != is_healthy) NotifyChange();
}

void WorkerRegistry::Unregister(internal::RegistryProbe* probe) {
  absl::MutexLock lock(&mu_);
  probes_.erase(probe);
}

void WorkerRegistry::MarkNotServingLocked(Worker& worker) {
  worker.serving = false;
  worker.model.reset();  // re-read on the next healthy transition (the worker may restart)
}

void WorkerRegistry::OnCheckDone(int w, uint64_t generation, const grpc::Status& status,
                                 HealthCheckResponse::ServingStatus serving) {
  bool fetch_model = false, ejected = false;
  bool was_healthy = false, is_healthy = false;
  std::string why, address;  // why: set once per outage, when the worker stops counting
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (worker.generation != generation) return;  // the slot changed hands meanwhile
    worker.check_pending = false;
    address = worker.address;
    was_healthy = HealthyLocked(worker);
    if (status.ok()) {
      // Any answer means reachable: a half-open breaker closes; readiness is the answer itself.
      worker.breaker.OnProbeSuccess(absl::Now());
      worker.failed_checks = 0;
      if (serving == HealthCheckResponse::SERVING) {
        worker.serving = true;
        worker.logged_down = false;
      } else {
        if (worker.serving) {
          why = absl::StrCat("health status ", HealthCheckResponse::ServingStatus_Name(serving));
        }
        MarkNotServingLocked(worker);
      }
    } else if (worker.breaker.state() == CircuitBreaker::State::kOpen) {
      // The answer to a probe sent before a stream ejected the worker: the breaker decides.
    } else if (worker.breaker.state() == CircuitBreaker::State::kHalfOpen ||
               ++worker.failed_checks >= options_.unhealthy_threshold) {
      // A failed half-open probe re-opens for longer; a closed breaker trips at the threshold.
      ejected = TripLocked(worker);
      if (!worker.logged_down) {
        // Also reached by a worker that never came up: say once why it is not being used.
        why = absl::StrCat(worker.failed_checks, " failed health checks of '",
                           options_.worker_health_service, "', last: ", status.error_message(),
                           " (code ", status.error_code(), ")");
        worker.logged_down = true;
      }
    }
    if (worker.serving && !worker.model.has_value() && !worker.model_pending) {
      worker.model_pending = fetch_model = true;
    }
    is_healthy = HealthyLocked(worker);
  }
  if (fetch_model) FetchModelInfo(w, generation);
  if (!why.empty()) {
    PKV_LOG(WARNING) << "worker " << address << (ejected ? " ejected: " : " unhealthy: ") << why;
  }
  if (was_healthy != is_healthy) NotifyChange();
}

void WorkerRegistry::OnLoadDone(int w, uint64_t generation, const grpc::Status& status,
                                const pkv::v1::Load& load) {
  bool was_healthy = false, is_healthy = false;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (worker.generation != generation) return;
    worker.load_pending = false;
    if (!status.ok()) return;  // health checks decide; a failed poll keeps the last known load
    was_healthy = HealthyLocked(worker);
    worker.reported_load = static_cast<uint64_t>(load.running()) + load.waiting();
    worker.draining = load.draining();
    if (!load.worker_id().empty()) worker.worker_id = load.worker_id();
    is_healthy = HealthyLocked(worker);
    address = worker.address;
  }
  if (was_healthy && !is_healthy) {
    PKV_LOG(INFO) << "worker " << address << " is draining; no new placements";
  }
  if (was_healthy != is_healthy) NotifyChange();
}

void WorkerRegistry::OnModelInfoDone(int w, uint64_t generation, const grpc::Status& status,
                                     const pkv::v1::ModelInfo& model) {
  bool became_healthy = false;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    Worker& worker = *workers_[w];
    if (worker.generation != generation) return;
    worker.model_pending = false;
    address = worker.address;
    if (status.ok() && UsableModel(model) && worker.serving) {
      const bool was_healthy = HealthyLocked(worker);
      worker.model = model;
      became_healthy = !was_healthy && HealthyLocked(worker);
    }
  }
  if (!status.ok()) {
    PKV_LOG(WARNING) << "worker " << address << ": GetModelInfo failed: " << status.error_message();
  } else if (!UsableModel(model)) {
    PKV_LOG(WARNING) << "worker " << address << " reported an unusable model (vocab_size "
                     << model.vocab_size() << ", max_context " << model.max_context() << ")";
  }
  if (became_healthy) {
    PKV_LOG(INFO) << "worker " << address << " healthy: model " << model.model_name() << ", vocab "
                  << model.vocab_size() << ", max_context " << model.max_context() << ", backend "
                  << model.backend();
    NotifyChange();
  }
}

}  // namespace pkv::router
