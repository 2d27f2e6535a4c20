#include "bench/kernels/report.h"

namespace pkv::bench {
namespace {

double FlashInferUs(const RowResult& r, const RunInfo& info) {
  auto it = info.flashinfer_us.find(r.trace);
  return it == info.flashinfer_us.end() ? 0.0 : it->second;
}

}  // namespace

void WriteTsvHeader(std::FILE* f) {
  std::fprintf(
      f,
      "trace\tkind\tbatch\tsum_len\tmax_len\troute\tvariant\tgpu_us\tgpu_us_p10\t"
      "gpu_us_p90\twall_us\tkv_bytes\tgbps\tfrac_bw\tlaunches\tctas\titems\t"
      "items_nonempty\toccupancy\tmerge_bytes\tplan_us\tsm_count\tsm_mode\tstream_gbps\t"
      "fi_us\tspeedup_vs_fi\tmax_diff_vs_fused\tgraph_us\tf_batch\tf_total_kv_bytes\tf_max_len\t"
      "f_min_len\tf_mean_len\tf_len_cv\tf_items_nonempty\tf_launches\tf_num_sms\n");
}

void WriteTsvRow(std::FILE* f, const RowResult& r, const RunInfo& info) {
  const auto& c = r.counters;
  const auto& x = r.features;
  const double fi = FlashInferUs(r, info);
  std::fprintf(
      f,
      "%s\t%s\t%d\t%lld\t%d\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.1f\t%.4f\t%d\t%d\t"
      "%d\t%d\t%.4f\t%lld\t%.2f\t%d\t%s\t%.1f\t%.2f\t%.4f\t%.3g\t%.2f\t%d\t%lld\t%d\t%d\t%.1f\t"
      "%.4f\t%d\t%d\t%d\n",
      r.trace.c_str(), r.kind.c_str(), r.batch, static_cast<long long>(r.sum_len), r.max_len,
      r.route.c_str(), r.variant.c_str(), r.gpu_us, r.gpu_us_p10, r.gpu_us_p90, r.wall_us,
      r.kv_bytes, r.gbps, r.frac_bw, c.launches, c.ctas, c.items, c.items_nonempty, c.occupancy(),
      static_cast<long long>(c.merge_state_bytes), c.plan_us, info.sm_count, info.sm_mode.c_str(),
      info.stream_gbps, fi, fi > 0 ? fi / r.gpu_us : 0.0, r.max_diff_vs_fused, r.graph_us, x.batch,
      static_cast<long long>(x.total_kv_bytes), x.max_len, x.min_len, x.mean_len, x.len_cv,
      x.items_nonempty, x.launches, x.num_sms);
}

void PrintTableHeader(std::FILE* f) {
  std::fprintf(f, "%-22s %-15s %-9s %9s %9s %9s %9s %6s %4s %6s %9s %7s %7s %9s\n", "trace",
               "route", "variant", "gpu_us", "p90", "graph_us", "wall_us", "bw", "lch", "occ",
               "merge_KB", "plan_us", "vs_fi", "maxdiff");
}

void PrintTableRow(std::FILE* f, const RowResult& r, const RunInfo& info) {
  const double fi = FlashInferUs(r, info);
  std::fprintf(f,
               "%-22s %-15s %-9s %9.2f %9.2f %9.2f %9.2f %6.3f %4d %6.3f %9.1f %7.2f %7.3f %9.2g\n",
               r.trace.c_str(), r.route.c_str(), r.variant.c_str(), r.gpu_us, r.gpu_us_p90,
               r.graph_us, r.wall_us, r.frac_bw, r.counters.launches, r.counters.occupancy(),
               r.counters.merge_state_bytes / 1024.0, r.counters.plan_us,
               fi > 0 ? fi / r.gpu_us : 0.0, r.max_diff_vs_fused);
}

}  // namespace pkv::bench
