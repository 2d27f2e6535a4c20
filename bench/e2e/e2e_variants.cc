#include "bench/e2e/e2e_variants.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kernels/model/gemv_plan.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/fused_bulk.h"

namespace pkv::bench {

absl::StatusOr<std::vector<Variant>> ParseVariants(const std::string& list) {
  std::vector<Variant> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    Variant v;
    v.name = std::string(name);
    // "<variant>+waves": the same with the decode workqueue's wave-model layout (the baseline of
    // the balanced one, decode::PlanOptions::workqueue_balanced).
    // "<variant>+overlap": steps pipelined (ModelBackend::Launch / Finish, the worker's
    // --overlap_steps): step N+1 launched, its tokens fed back on the device, before step N is
    // finished; the step time is then the interval between finishes.
    v.overlap = absl::ConsumeSuffix(&name, "+overlap");
    // "<variant>+compact": decode rows' KV pages taken in order from page 0, not scattered over
    // the whole pool (RunDecode's compact_pages: does physical locality matter to attention?).
    v.compact_pages = absl::ConsumeSuffix(&name, "+compact");
    // "<variant>+noattn": no attention launched (wrong outputs; a timing knockout: the step's
    // time without attention is what attention costs on the critical path).
    v.skip_attention = absl::ConsumeSuffix(&name, "+noattn");
    v.workqueue_waves = absl::ConsumeSuffix(&name, "+waves");
    // "<variant>+w8" / "+w4": 16-bit pages' w8s3 config for one- and two-row steps on / off
    // (DecodePolicyOptions::few_row_w8; the default when neither).
    if (absl::ConsumeSuffix(&name, "+w8")) v.few_row_w8 = true;
    if (absl::ConsumeSuffix(&name, "+w4")) v.few_row_w8 = false;
    // "<variant>+bulk": one-token gate/up and down on the bulk-copy GEMV (fused_gemv_bulk);
    // "<variant>+bulk:o.down": the projections named (qkv, o, gateup, down); "+bulk:none": none
    // (without a "+bulk" suffix: the backend's default, kFusedBulkAuto).
    if (const size_t at = name.rfind("+bulk"); at != absl::string_view::npos) {
      absl::string_view spec = name.substr(at + 5);
      v.gemv_bulk = kBulkGateUp | kBulkDown;
      if (absl::ConsumePrefix(&spec, ":")) {
        absl::StatusOr<uint32_t> bulk = ParseFusedBulk(spec);  // projections joined by '.'
        if (!bulk.ok()) return bulk.status();
        v.gemv_bulk = *bulk;
      } else if (!spec.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("variant '", v.name, "': '+bulk", spec,
                                                       "' is neither +bulk nor +bulk:P.P.."));
      }
      name = name.substr(0, at);
    }
    absl::string_view pf = name;
    const bool prefetch = absl::ConsumePrefix(&pf, "fused+pdl+pf") &&
                          absl::SimpleAtoi(pf, &v.prefetch_steps) && v.prefetch_steps > 0;
    absl::string_view pn = name;
    const bool prenorm = absl::ConsumePrefix(&pn, "fused+pdl+prenorm") &&
                         absl::SimpleAtoi(pn, &v.prenorm_min_tokens) && v.prenorm_min_tokens > 0;
    if (name == "skinny") {
      v.skinny = true;
    } else if (name == "pdl") {
      v.pdl = true;
    } else if (name == "fused") {
      v.fused = true;
    } else if (name == "fused+pdl+prenorm") {  // the worker's default: auto
      v.fused = v.pdl = true;
      v.prenorm_min_tokens = kFusedPrenormAuto;
    } else if (name == "fused+pdl" || prefetch || prenorm) {
      v.fused = v.pdl = true;
    } else if (name == "lt") {
      v.tuned = true;
    } else if (name == "lt+pdl") {
      v.tuned = v.pdl = true;
    } else if (name == "det") {  // the first form: whole rows, fixed-row GEMM chunks
      v.deterministic = v.pdl = true;
      v.det_form = DeterministicForm{false, false};
    } else if (name == "det-split" || name == "det-pinned" || name == "det-fast") {
      v.deterministic = v.pdl = true;
      v.det_form.split_tiles = name != "det-pinned";
      v.det_form.pinned_gemm = name != "det-split";
    } else if (name == "eager") {
      v.graphs = false;
    } else if (name != "cublas") {  // cublas: the defaults
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown variant '", v.name,
          "'; known: cublas, skinny, pdl, fused, fused+pdl, fused+pdl+pfN, "
          "fused+pdl+prenorm, fused+pdl+prenormN, lt, lt+pdl, eager, det, det-split, det-pinned, "
          "det-fast; any of them + \"+bulk\" or \"+bulk:o.down\" (qkv, o, gateup, down; none), "
          "then \"+w8\" or \"+w4\", then \"+waves\", then optionally \"+noattn\", "
          "\"+compact\", \"+overlap\" in that order"));
    }
    out.push_back(v);
  }
  return out;
}

std::string VariantSkipReason(const Variant& v, int32_t batch, const CudaModelBackend& b) {
  if (v.skinny && batch > gpu::kSkinnyGemmMaxTokens) return "skinny GEMM takes <= 4 tokens";
  if (v.fused && batch > gpu::kGemvMaxTokens) return "fused path takes <= 8 tokens";
  if (v.fused && !b.fused_available()) return "fused path unavailable for this shape";
  if (v.pdl && !b.pdl_available()) return "programmatic dependent launch unavailable";
  return "";
}

absl::Status ApplyVariant(const Variant& v, CudaModelBackend* b) {
  b->SetCudaGraphs(v.graphs);
  b->SetSkinnyGemm(v.skinny);
  b->SetFusedSmallBatch(v.fused);
  b->SetPdl(v.pdl);
  b->SetWorkqueueBalanced(!v.workqueue_waves);
  b->SetFewRowW8(v.few_row_w8);
  b->SetFusedGemvBulk(v.gemv_bulk);
  b->SetSkipAttentionForTiming(v.skip_attention);
  b->SetFusedPrefetchSteps(v.prefetch_steps);
  b->SetFusedPrenormMinTokens(v.prenorm_min_tokens);
  PKV_RETURN_IF_ERROR(b->SetDeterministic(v.deterministic, v.det_form));
  return b->SetGemmAutotune(v.tuned);
}

}  // namespace pkv::bench
