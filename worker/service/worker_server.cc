#include "worker/service/worker_server.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/shutdown_signal.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "metrics/metrics_server.h"
#include "prometheus/registry.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/tp_cpu_backend.h"
#if PKV_HAVE_CUDA
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/tp_cuda_backend.h"
#endif
#include "worker/service/engine.h"
#include "worker/service/test_faults.h"
#include "worker/service/worker_health.h"
#include "worker/service/worker_metrics.h"
#include "worker/service/worker_service.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {
namespace {

constexpr int64_t kDefaultCpuKvPages = 2048;

std::string PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(colon + 1);
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
    c.policy_file = o.policy_file;
    c.policy_dir = o.policy_dir;
    c.decode_policy = o.decode_policy;
    c.fused_small_batch = o.fused_small_batch;
    c.fused_max_hidden = o.fused_max_hidden;
    c.pdl = o.pdl;
    c.gemm_autotune = o.gemm_autotune;
    c.max_step_tokens = std::max(1, o.max_batch_tokens);
    c.max_rows = std::max(1, std::min(o.max_running, o.max_batch_tokens));  // as the scheduler
    if (o.tp > 1) {
      TpCudaOptions t;
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
  const int64_t pages = o.kv_pages > 0 ? o.kv_pages : kDefaultCpuKvPages;
  if (o.tp > 1) return LoadTpCpuBackend(o.model_dir, o.tp, o.page_size, pages);
  return LoadCpuBackend(o.model_dir, o.page_size, pages);
}

}  // namespace

int RunWorker(const WorkerOptions& o) {
  ShutdownSignal shutdown;  // first: blocks SIGTERM/SIGINT before any other thread starts
  const std::string worker_id = o.worker_id.empty() ? "worker-" + PortOf(o.listen) : o.worker_id;
  SetLogTag(worker_id);

  if (absl::Status valid = ValidateWorkerOptions(o); !valid.ok()) {
    PKV_LOG(ERROR) << valid.message();
    return 2;
  }
  absl::StatusOr<TestFaults> faults = ParseTestFaults(o.test_fault);
  if (!faults.ok()) {
    PKV_LOG(ERROR) << faults.status().message();
    return 2;
  }
  if (faults->any() && !o.enable_test_faults) {
    PKV_LOG(ERROR) << "--test_fault is refused without --enable_test_faults";
    return 2;
  }

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      WorkerServerCredentials(o.security);
  if (!credentials.ok()) {
    PKV_LOG(ERROR) << credentials.status().message();
    return 2;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      MetricsServer::Start(o.metrics_listen, registry);
  if (!metrics_server.ok()) {
    PKV_LOG(ERROR) << metrics_server.status().message() << " (pick another --metrics_listen)";
    return 1;
  }

  std::atomic<double> drain_timeout_s{absl::ToDoubleSeconds(o.drain_timeout)};
  WorkerService service(worker_id, [&](double timeout_s) {
    if (timeout_s > 0) drain_timeout_s.store(timeout_s);
    shutdown.Request("Drain RPC");
  });
  service.SetPeerPolicy(PeerPolicy(o.security));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(o.listen, *credentials, &bound_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, o.max_metadata_bytes);
  // Let the router's keepalive pings (1 s, also without calls) through: RELIABILITY.md 3.0.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    PKV_LOG(ERROR) << "cannot listen on " << o.listen << " (address in use?)";
    return 1;
  }
  SetWorkerLiveness(server.get(), true);    // the process serves gRPC (worker_health.h)
  SetWorkerReadiness(server.get(), false);  // not until the model and KV pool are ready
  PKV_LOG(INFO) << "loading model from " << o.model_dir;

  absl::StatusOr<std::unique_ptr<ModelBackend>> backend = LoadBackend(o);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      backend.ok() ? Tokenizer::FromModelDir(o.model_dir)
                   : absl::StatusOr<std::unique_ptr<Tokenizer>>(backend.status());
  if (!backend.ok() || !tokenizer.ok()) {
    const absl::Status& st = backend.ok() ? tokenizer.status() : backend.status();
    PKV_LOG(ERROR) << "cannot load the model: " << st.message()
                   << " (create the demo model with `make model`, or point --model at a Hugging "
                      "Face Llama/Qwen/Mistral folder)";
    server->Shutdown();
    return 1;
  }
  const ModelConfig& config = (*backend)->config();
  const int64_t capacity = (*backend)->num_kv_pages() * (*backend)->page_size();
  const int32_t max_context =
      o.max_model_len > 0 ? o.max_model_len : config.max_position_embeddings;
  if (max_context > capacity) {
    // RELIABILITY V4: refuse rather than silently clamp, so the advertised limit is always real.
    PKV_LOG(ERROR) << "max context " << max_context << " tokens does not fit the KV pool of "
                   << (*backend)->num_kv_pages() << " pages x " << (*backend)->page_size()
                   << " tokens = " << capacity << "; raise --kv_pages or lower --max_model_len";
    server->Shutdown();
    return 1;
  }

  WorkerMetrics metrics(registry.get(), worker_id, (*backend)->backend_name(), o.model_dir);
  EngineOptions eo;
  eo.worker_id = worker_id;
  eo.model_name = o.model_dir;
  eo.max_context = max_context;
  eo.scheduler = o.Scheduler((*backend)->page_size());
  eo.faults = *faults;
  eo.chat = ChatPromptRenderer::Load(o.model_dir);
  std::atomic<bool> fatal{false};
  eo.on_fatal = [&](absl::Status st) {
    fatal.store(true);
    shutdown.Request(absl::StrCat("fatal backend error: ", st.message()));
  };
  Engine engine(std::move(eo), std::move(*backend), std::move(*tokenizer), &metrics);
  engine.Start();
  service.SetEngine(&engine);
  SetWorkerReadiness(server.get(), true);
  PKV_LOG(INFO) << "ready on " << o.listen << " (" << WorkerSecuritySummary(o.security)
                << ", metrics " << o.metrics_listen << ", backend "
                << engine.backend().backend_name() << ", " << engine.backend().num_kv_pages()
                << " KV pages, max context " << max_context << ")";

  const std::string reason =
      WaitForShutdownWatchingEngine(shutdown, engine, server.get(), o.engine_stall_timeout);
  SetWorkerReadiness(server.get(), false);  // SIGTERM, Drain or fatal: no new work, at once
  if (fatal.load()) {
    SetWorkerLiveness(server.get(), false);
    PKV_LOG(ERROR) << "stopping: " << reason;
    // In-flight streams already carry their INTERNAL status; give them time to deliver it (a
    // stream cut by the shutdown instead looks like a lost worker and would be migrated).
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    engine.Stop(absl::InternalError(reason));
    return 1;
  }
  const double timeout = drain_timeout_s.load();
  PKV_LOG(INFO) << "draining (" << reason << "), up to " << timeout << " s";
  engine.BeginDrain();
  if (!engine.WaitIdle(absl::Now() + absl::Seconds(timeout))) {
    PKV_LOG(WARNING) << "drain timeout: aborting requests still in flight";
    engine.CancelAll(AbortReason::kShutdown);
    engine.WaitIdle(absl::Now() + absl::Seconds(2));
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  engine.Stop(absl::UnavailableError("worker shut down"));
  PKV_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace pkv
