#include "kernels/policy/policy_loader.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace pkv::policy {
namespace {

bool SameShape(const KvShape& a, const KvShape& b) {
  return a.num_q_heads == b.num_q_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.page_size == b.page_size &&
         a.kv_elem_bytes == b.kv_elem_bytes;
}

void WarnOnMismatch(const PolicyFile& f, const std::string& path, const decode::DeviceLimits& l,
                    const KvShape& shape) {
  if (f.num_sms != l.num_sms || f.ctas_per_sm != l.ctas_per_sm) {
    PKV_LOG(WARNING) << "decode policy " << path << " was calibrated for " << f.num_sms << " SMs x "
                     << f.ctas_per_sm << " CTAs, this GPU runs " << l.num_sms << " x "
                     << l.ctas_per_sm;
  }
  if (!SameShape(f.shape, shape)) {
    PKV_LOG(WARNING) << "decode policy " << path
                     << " was calibrated for H_q=" << f.shape.num_q_heads
                     << " H_kv=" << f.shape.num_kv_heads << " D=" << f.shape.head_dim << " page "
                     << f.shape.page_size << ", the model has H_q=" << shape.num_q_heads
                     << " H_kv=" << shape.num_kv_heads << " D=" << shape.head_dim << " page "
                     << shape.page_size;
  }
}

std::string Describe(const KvShape& s, int32_t ctas_per_sm) {
  return absl::StrCat("H_q=", s.num_q_heads, " H_kv=", s.num_kv_heads, " D=", s.head_dim, " page ",
                      s.page_size, " kv_elem_bytes ", s.kv_elem_bytes, ", ", ctas_per_sm,
                      " CTAs per SM");
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

absl::StatusOr<LoadedPolicy> FromFile(const PolicyFile& f, const std::string& origin,
                                      const std::string& kind) {
  LoadedPolicy out;
  PKV_ASSIGN_OR_RETURN(out.policy, MakePolicy(f, kind));
  out.kv_elem_bytes = f.shape.kv_elem_bytes;
  out.origin = absl::StrCat(out.policy->kind(), " policy from ", origin);
  return out;
}

}  // namespace

namespace {

// The policy at `path` when it exists and fits `shape` and the CTAs per SM; a mismatch is logged
// with both sides of the comparison, so it can be read from the log alone.
std::optional<PolicyFile> UsableFile(const std::string& path, const decode::DeviceLimits& limits,
                                     const KvShape& shape) {
  if (!Exists(path)) return std::nullopt;
  absl::StatusOr<PolicyFile> f = ReadPolicyFile(path);
  if (f.ok() && SameShape(f->shape, shape) && f->ctas_per_sm == limits.ctas_per_sm) return *f;
  PKV_LOG(WARNING) << "decode policy " << path << " is not usable for this model ("
                   << (f.ok() ? absl::StrCat(
                                    "file: ", Describe(f->shape, f->ctas_per_sm),
                                    "; this GPU and model: ", Describe(shape, limits.ctas_per_sm))
                              : std::string(f.status().message()))
                   << ")";
  return std::nullopt;
}

}  // namespace

absl::StatusOr<std::optional<LoadedPolicy>> LoadStoredPolicy(const PolicySource& source,
                                                             const std::string& gpu_name,
                                                             const decode::DeviceLimits& limits,
                                                             const KvShape& shape) {
  for (const std::string& name : {PolicyFileName(gpu_name, limits.num_sms, shape.kv_elem_bytes),
                                  PolicyCacheFileName(gpu_name, limits.num_sms, shape)}) {
    const std::string path = absl::StrCat(source.policy_dir, "/", name);
    if (std::optional<PolicyFile> f = UsableFile(path, limits, shape)) {
      return FromFile(*f, path, source.kind);
    }
  }
  return std::nullopt;
}

namespace {

// "fixed:<route>[:<min_split_tokens>]": one route always, optionally with the planner's
// shortest split (to measure a route and split size in place, e.g. in pkv-bench e2e).
absl::StatusOr<LoadedPolicy> ParseFixedPolicy(absl::string_view kind) {
  const std::vector<std::string> parts = absl::StrSplit(kind.substr(6), ':');
  PKV_ASSIGN_OR_RETURN(decode::Route r, decode::ParseRoute(parts[0]));
  SplitParams params;
  if (parts.size() > 2 ||
      (parts.size() == 2 &&
       (!absl::SimpleAtoi(parts[1], &params.min_split_tokens) || params.min_split_tokens < 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode policy '", kind, "': expected fixed:<route> or fixed:<route>:<min_split_tokens> ",
        "with min_split_tokens >= 1"));
  }
  return LoadedPolicy{std::make_unique<FixedPolicy>(r, params),
                      absl::StrCat("fixed route ", kind.substr(6))};
}

}  // namespace

absl::StatusOr<LoadedPolicy> LoadPolicyForGpu(const PolicySource& source,
                                              const std::string& gpu_name,
                                              const decode::DeviceLimits& limits,
                                              const KvShape& shape, const CalibrateFn& calibrate) {
  if (absl::StartsWith(source.kind, "fixed:")) return ParseFixedPolicy(source.kind);
  if (!source.kind.empty() && source.kind != "learned" && source.kind != "threshold") {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode policy kind '", source.kind, "' is not one of learned, threshold, fixed:<route>"));
  }
  if (!source.policy_file.empty()) {
    PKV_ASSIGN_OR_RETURN(PolicyFile f, ReadPolicyFile(source.policy_file));
    WarnOnMismatch(f, source.policy_file, limits, shape);
    return FromFile(f, source.policy_file, source.kind);
  }
  PKV_ASSIGN_OR_RETURN(std::optional<LoadedPolicy> stored,
                       LoadStoredPolicy(source, gpu_name, limits, shape));
  if (stored.has_value()) return *std::move(stored);
  // Cached under the model's shape: never over a fitted file, nor over another model's cache.
  const std::string cached =
      absl::StrCat(source.policy_dir, "/", PolicyCacheFileName(gpu_name, limits.num_sms, shape));
  absl::StatusOr<PolicyFile> fresh =
      calibrate ? calibrate() : absl::UnavailableError("no calibration runner");
  if (!fresh.ok()) {
    PKV_LOG(WARNING) << "decode policy: on-start calibration failed (" << fresh.status().message()
                     << "); using the engine's default route";
    return LoadedPolicy{std::make_unique<FixedPolicy>(decode::PlanOptions{}.route),
                        "the engine's default route (no policy file, calibration failed)"};
  }
  std::error_code ec;  // a missing cache directory is created; failing that, nothing is cached
  std::filesystem::create_directories(source.policy_dir, ec);
  const absl::Status written = WritePolicyFile(cached, *fresh);
  if (!written.ok()) {
    PKV_LOG(WARNING) << "decode policy: could not cache the calibration (" << written.message()
                     << ")";
  }
  return FromFile(*fresh,
                  written.ok() ? absl::StrCat("on-start calibration, cached in ", cached)
                               : std::string("on-start calibration (not cached)"),
                  source.kind);
}

}  // namespace pkv::policy
