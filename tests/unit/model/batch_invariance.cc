#include "tests/unit/model/batch_invariance.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv::testing {
namespace {

constexpr int32_t kAll = std::numeric_limits<int32_t>::max() / 2;  // a whole prompt or history

struct State {
  const InvarianceSeq* seq = nullptr;
  std::vector<int32_t> tokens;  // prompt, then the generated tokens
  int32_t fed = 0;              // tokens whose KV this run has written
  SamplingParams params;
  std::vector<Record> records;
};

// Feeds sequences step by step; a sequence with all its records is left out of later steps.
class Driver {
 public:
  Driver(ModelBackend* backend, const std::vector<InvarianceSeq>& seqs,
         const InvarianceOptions& options)
      : backend_(backend), options_(options), states_(seqs.size()) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      states_[i].seq = &seqs[i];
      states_[i].tokens = seqs[i].prompt;
      states_[i].params = options.params;
      states_[i].params.seed = options.params.seed + i;
    }
  }

  size_t size() const { return states_.size(); }
  State& state(size_t i) { return states_[i]; }
  bool Done(size_t i) const {
    return static_cast<int32_t>(states_[i].records.size()) >= options_.steps;
  }
  bool AllDone() const {
    for (size_t i = 0; i < states_.size(); ++i) {
      if (!Done(i)) return false;
    }
    return true;
  }
  bool Prefilling(size_t i) const { return states_[i].records.empty(); }

  // One step: up to n tokens of each listed sequence, in the listed order.
  absl::Status Step(const std::vector<std::pair<size_t, int32_t>>& feeds) {
    std::vector<BatchRow> rows;
    std::vector<std::pair<size_t, int32_t>> fed;  // (sequence, tokens) per row
    for (const auto& [i, want] : feeds) {
      State& s = states_[i];
      const int32_t n = std::min<int32_t>(want, static_cast<int32_t>(s.tokens.size()) - s.fed);
      if (Done(i) || n <= 0) continue;
      BatchRow r;
      r.tokens = s.tokens.data() + s.fed;
      r.num_tokens = n;
      r.start_pos = s.fed;
      r.pages = s.seq->pages.data();
      r.num_pages = static_cast<int32_t>(s.seq->pages.size());
      r.sample = s.fed + n == static_cast<int32_t>(s.tokens.size());
      r.params = &s.params;
      r.sample_index = static_cast<int32_t>(s.records.size());
      r.sequence_id = i + 1;
      rows.push_back(r);
      fed.emplace_back(i, n);
    }
    if (rows.empty()) return absl::OkStatus();
    std::vector<Record> out;
    PKV_RETURN_IF_ERROR(options_.use_forward ? RunForward(rows, &out) : RunStep(rows, &out));
    size_t k = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      State& s = states_[fed[r].first];
      s.fed += fed[r].second;
      if (!rows[r].sample) continue;
      if (k >= out.size()) return absl::InternalError("fewer samples than sampled rows");
      s.tokens.push_back(out[k].token);
      s.records.push_back(std::move(out[k++]));
    }
    return absl::OkStatus();
  }

  SeqRecords Take() {
    SeqRecords r;
    for (State& s : states_) r.push_back(std::move(s.records));
    return r;
  }

 private:
  absl::Status RunForward(const std::vector<BatchRow>& rows, std::vector<Record>* out) {
    std::vector<float> logits;
    PKV_RETURN_IF_ERROR(backend_->Forward(rows, &logits));
    const int32_t vocab = backend_->config().vocab_size;
    for (size_t off = 0; off + vocab <= logits.size(); off += vocab) {
      Record rec;
      rec.logits.assign(logits.begin() + off, logits.begin() + off + vocab);
      rec.token = static_cast<int32_t>(std::max_element(rec.logits.begin(), rec.logits.end()) -
                                       rec.logits.begin());
      out->push_back(std::move(rec));
    }
    return absl::OkStatus();
  }
  absl::Status RunStep(const std::vector<BatchRow>& rows, std::vector<Record>* out) {
    std::vector<SampleResult> samples;
    PKV_RETURN_IF_ERROR(backend_->Step(rows, &samples, nullptr));
    for (SampleResult& s : samples) {
      Record rec;
      rec.token = s.token_id;
      rec.logprob = s.logprob;
      rec.top = std::move(s.top);
      out->push_back(std::move(rec));
    }
    return absl::OkStatus();
  }

  ModelBackend* backend_;
  InvarianceOptions options_;
  std::vector<State> states_;
};

absl::Status RunAlone(Driver& d) {
  for (size_t i = 0; i < d.size(); ++i) {
    PKV_RETURN_IF_ERROR(d.Step({{i, kAll}}));
    while (!d.Done(i)) PKV_RETURN_IF_ERROR(d.Step({{i, 1}}));
  }
  return absl::OkStatus();
}

absl::Status RunTogether(Driver& d) {
  std::vector<std::pair<size_t, int32_t>> prompts, decode;
  for (size_t i = 0; i < d.size(); ++i) prompts.emplace_back(i, kAll);
  for (size_t i = d.size(); i-- > 0;) decode.emplace_back(i, 1);
  PKV_RETURN_IF_ERROR(d.Step(prompts));
  while (!d.AllDone()) PKV_RETURN_IF_ERROR(d.Step(decode));
  return absl::OkStatus();
}

// Sequences 0 and 1 start together; sequence 3 is fed chunks of 64, 1, 2, 7 tokens, then the
// rest; every other sequence 48 tokens a step, all inside the decode steps of the others.
absl::Status RunChunked(Driver& d) {
  PKV_RETURN_IF_ERROR(d.Step({{0, kAll}, {1, kAll}}));
  const std::vector<int32_t> seq3_chunks = {64, 1, 2, 7, kAll};
  size_t seq3_next = 0;
  std::vector<size_t> order;
  for (size_t i = d.size(); i-- > 0;) order.push_back(i);  // prefilling rows first, some steps
  for (int32_t step = 0; !d.AllDone(); ++step) {
    std::vector<std::pair<size_t, int32_t>> feeds;
    for (size_t i : order) {
      int32_t n = 1;
      if (d.Prefilling(i)) {
        n = i == 3 ? seq3_chunks[std::min(seq3_next++, seq3_chunks.size() - 1)] : 48;
      }
      feeds.emplace_back(i, n);
    }
    if (step % 2 == 1) std::reverse(feeds.begin(), feeds.end());
    PKV_RETURN_IF_ERROR(d.Step(feeds));
  }
  return absl::OkStatus();
}

absl::Status RunRecompute(Driver& d, int32_t steps) {
  for (size_t i = 0; i < d.size(); ++i) {
    PKV_RETURN_IF_ERROR(d.Step({{i, kAll}}));
    while (static_cast<int32_t>(d.state(i).records.size()) < steps / 2) {
      PKV_RETURN_IF_ERROR(d.Step({{i, 1}}));
    }
    d.state(i).fed = 0;  // forget the KV: the whole history again, as one prefill chunk
    PKV_RETURN_IF_ERROR(d.Step({{i, kAll}}));
    while (!d.Done(i)) PKV_RETURN_IF_ERROR(d.Step({{i, 1}}));
  }
  return absl::OkStatus();
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace

const char* MixName(MixKind kind) {
  switch (kind) {
    case MixKind::kAlone:
      return "alone";
    case MixKind::kTogether:
      return "together";
    case MixKind::kChunked:
      return "chunked";
    case MixKind::kRecompute:
      return "recompute";
  }
  return "?";
}

absl::StatusOr<SeqRecords> RunMix(ModelBackend* backend, const std::vector<InvarianceSeq>& seqs,
                                  MixKind kind, const InvarianceOptions& options) {
  for (const InvarianceSeq& s : seqs) {
    if (s.prompt.size() < 2) return absl::InvalidArgumentError("prompts need >= 2 tokens");
  }
  if (kind == MixKind::kChunked && seqs.size() < 4) {
    return absl::InvalidArgumentError("the chunked mix needs at least 4 sequences");
  }
  Driver d(backend, seqs, options);
  switch (kind) {
    case MixKind::kAlone:
      PKV_RETURN_IF_ERROR(RunAlone(d));
      break;
    case MixKind::kTogether:
      PKV_RETURN_IF_ERROR(RunTogether(d));
      break;
    case MixKind::kChunked:
      PKV_RETURN_IF_ERROR(RunChunked(d));
      break;
    case MixKind::kRecompute:
      PKV_RETURN_IF_ERROR(RunRecompute(d, options.steps));
      break;
  }
  return d.Take();
}

int32_t FirstDifference(const std::vector<Record>& ref, const std::vector<Record>& got,
                        std::string* what) {
  const size_t n = std::min(ref.size(), got.size());
  for (size_t k = 0; k < n; ++k) {
    const Record& a = ref[k];
    const Record& b = got[k];
    if (a.token != b.token) {
      *what = absl::StrCat("token ", b.token, " instead of ", a.token);
      return static_cast<int32_t>(k);
    }
    if (a.logits.size() != b.logits.size() ||
        (!a.logits.empty() &&
         std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) != 0)) {
      *what = "logits differ (same argmax)";
      return static_cast<int32_t>(k);
    }
    bool same = SameBits(a.logprob, b.logprob) && a.top.size() == b.top.size();
    for (size_t j = 0; same && j < a.top.size(); ++j) {
      same = a.top[j].token_id == b.top[j].token_id && SameBits(a.top[j].logprob, b.top[j].logprob);
    }
    if (!same) {
      *what = "log-probabilities differ (same token)";
      return static_cast<int32_t>(k);
    }
  }
  if (ref.size() != got.size()) {
    *what = absl::StrCat(got.size(), " records instead of ", ref.size());
    return static_cast<int32_t>(n);
  }
  return -1;
}

}  // namespace pkv::testing
