#include "tests/unit/model/test_model.h"

#include <cmath>
#include <random>

namespace pkv::testing {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [tokens][features]

Vec RmsNormD(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// y = W x (+ b), W stored [out][in].
Vec MatVec(const std::vector<float>& w, const std::vector<float>& b, const Vec& x, size_t out) {
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o) {
    double acc = b.empty() ? 0.0 : b[o];
    for (size_t i = 0; i < x.size(); ++i) acc += static_cast<double>(w[o * x.size() + i]) * x[i];
    y[o] = acc;
  }
  return y;
}

// HF apply_rotary_pos_emb: q*cos + rotate_half(q)*sin with rotate_half(x) = cat(-x2, x1).
void RopeD(Vec* x, int heads, int d, int pos, const Vec& freq) {
  for (int h = 0; h < heads; ++h) {
    Vec head(x->begin() + h * d, x->begin() + (h + 1) * d);
    for (int j = 0; j < d; ++j) {
      const double angle = pos * freq[j % (d / 2)];
      const double rot = j < d / 2 ? -head[j + d / 2] : head[j - d / 2];
      (*x)[h * d + j] = head[j] * std::cos(angle) + rot * std::sin(angle);
    }
  }
}

void PerHeadNorm(Vec* x, int heads, int d, const std::vector<float>& w, double eps) {
  for (int h = 0; h < heads; ++h) {
    Vec head(x->begin() + h * d, x->begin() + (h + 1) * d);
    head = RmsNormD(head, w, eps);
    std::copy(head.begin(), head.end(), x->begin() + h * d);
  }
}

Mat Attention(const Mat& q, const Mat& k, const Mat& v, const ModelConfig& c) {
  const int d = c.head_dim, group = c.num_q_heads / c.num_kv_heads;
  Mat out(q.size(), Vec(c.num_q_heads * d, 0.0));
  for (size_t i = 0; i < q.size(); ++i) {
    for (int h = 0; h < c.num_q_heads; ++h) {
      const int kh = h / group;
      Vec scores(i + 1);
      double mx = -1e300;
      for (size_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += q[i][h * d + e] * k[j][kh * d + e];
        scores[j] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - mx));
      for (size_t j = 0; j <= i; ++j) {
        for (int e = 0; e < d; ++e) out[i][h * d + e] += scores[j] / sum * v[j][kh * d + e];
      }
    }
  }
  return out;
}

void Layer(const LlamaLayerWeights& lw, const ModelConfig& c, const Vec& freq, Mat* x) {
  const int d = c.head_dim;
  const size_t n = x->size(), qd = c.num_q_heads * d, kvd = c.num_kv_heads * d;
  Mat q(n), k(n), v(n);
  for (size_t t = 0; t < n; ++t) {
    const Vec xn = RmsNormD((*x)[t], lw.input_norm, c.rms_norm_eps);
    q[t] = MatVec(lw.q_proj, lw.q_bias, xn, qd);
    k[t] = MatVec(lw.k_proj, lw.k_bias, xn, kvd);
    v[t] = MatVec(lw.v_proj, lw.v_bias, xn, kvd);
    if (c.qk_norm) {
      PerHeadNorm(&q[t], c.num_q_heads, d, lw.q_norm, c.rms_norm_eps);
      PerHeadNorm(&k[t], c.num_kv_heads, d, lw.k_norm, c.rms_norm_eps);
    }
    RopeD(&q[t], c.num_q_heads, d, static_cast<int>(t), freq);
    RopeD(&k[t], c.num_kv_heads, d, static_cast<int>(t), freq);
  }
  const Mat attn = Attention(q, k, v, c);
  for (size_t t = 0; t < n; ++t) {
    const Vec o = MatVec(lw.o_proj, lw.o_bias, attn[t], c.hidden_size);
    for (int i = 0; i < c.hidden_size; ++i) (*x)[t][i] += o[i];
    const Vec xn = RmsNormD((*x)[t], lw.post_norm, c.rms_norm_eps);
    Vec g = MatVec(lw.gate_proj, {}, xn, c.intermediate_size);
    const Vec u = MatVec(lw.up_proj, {}, xn, c.intermediate_size);
    for (int i = 0; i < c.intermediate_size; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const Vec down = MatVec(lw.down_proj, {}, g, c.hidden_size);
    for (int i = 0; i < c.hidden_size; ++i) (*x)[t][i] += down[i];
  }
}

}  // namespace

ModelConfig TinyConfig(const std::string& family) {
  ModelConfig c;
  c.model_type = "llama";
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = false;
  c.eos_token_ids = {96};
  if (family == "llama3") {
    c.tie_word_embeddings = true;
    c.head_dim = 16;
    c.num_q_heads = 2;
    c.num_kv_heads = 1;
    c.rope_theta = 500000.0f;
    // Small original context so the tiny head's frequencies fall in all three llama3 bands.
    c.rope_scaling = RopeScaling{"llama3", 8.0f, 1.0f, 4.0f, 64};
  } else if (family == "qwen2") {
    c.model_type = "qwen2";
    c.num_q_heads = 6;
    c.num_kv_heads = 2;
    c.hidden_size = 36;
    c.head_dim = 6;
    c.attention_bias = true;
    c.rope_theta = 1e6f;
  } else if (family == "qwen3") {
    c.model_type = "qwen3";
    c.num_q_heads = 4;
    c.num_kv_heads = 4;
    c.head_dim = 12;  // 4 * 12 != 32: o_proj is [hidden][48]
    c.qk_norm = true;
    c.tie_word_embeddings = true;
  }
  return c;
}

LlamaWeights RandomWeights(const ModelConfig& config, uint32_t seed, float scale) {
  LlamaWeights w;
  w.config = config;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (LlamaTensorSlot& slot : LlamaTensorSlots(&w)) {
    slot.dst->resize(slot.spec.numel());
    for (float& v : *slot.dst) {
      switch (slot.spec.kind) {
        case TensorSpec::Kind::kNorm:
          v = 1.0f + 0.1f * normal(rng);
          break;
        case TensorSpec::Kind::kBias:
          v = 0.1f * normal(rng);
          break;
        case TensorSpec::Kind::kEmbedding:
          v = normal(rng);  // unit-scale embeddings make the (tied) logits O(1)
          break;
        case TensorSpec::Kind::kMatrix:
          v = scale * normal(rng);
          break;
      }
    }
  }
  return w;
}

std::vector<double> DirectRopeFrequencies(const ModelConfig& c) {
  const int d = c.head_dim;
  Vec inv(d / 2);
  for (int i = 0; i < d / 2; ++i) inv[i] = 1.0 / std::pow(double{c.rope_theta}, (2.0 * i) / d);
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    const double low_wavelen = s.original_max_position_embeddings / double{s.low_freq_factor};
    const double high_wavelen = s.original_max_position_embeddings / double{s.high_freq_factor};
    for (double& f : inv) {
      const double wavelen = 2 * M_PI / f;
      double scaled = wavelen > low_wavelen ? f / s.factor : f;
      const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      const double smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
  }
  return inv;
}

std::vector<std::vector<double>> DenseForward(const LlamaWeights& w,
                                              const std::vector<int32_t>& tokens) {
  const ModelConfig& c = w.config;
  const Vec freq = DirectRopeFrequencies(c);
  Mat x;
  for (int32_t tok : tokens) {
    x.emplace_back(w.embed.begin() + tok * c.hidden_size,
                   w.embed.begin() + (tok + 1) * c.hidden_size);
  }
  for (int l = 0; l < c.num_layers; ++l) Layer(w.layers[l], c, freq, &x);
  Mat logits;
  for (const Vec& xt : x) {
    logits.push_back(
        MatVec(w.lm_head_matrix(), {}, RmsNormD(xt, w.final_norm, c.rms_norm_eps), c.vocab_size));
  }
  return logits;
}

}  // namespace pkv::testing
