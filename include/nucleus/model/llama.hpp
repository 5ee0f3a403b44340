// A reference Llama-family decoder (Llama, SmolLM, Qwen2, Qwen3) in f32 Eigen, loaded from any weight source.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "nucleus/io/io.hpp"
#include "nucleus/model/config.hpp"
#include "nucleus/model/kv_cache.hpp"
#include "nucleus/model/tensor_names.hpp"

namespace nucleus::model {

struct load_options {
  // KV-cache capacity in tokens. 0: the model's max_seq, capped at default_context so that a
  // 128k-context checkpoint does not reserve gigabytes of cache for a short chat.
  std::int64_t context = 0;
  static constexpr std::int64_t default_context = 8192;
};

// A reference Llama-family decoder (Llama, SmolLM, Qwen2, Qwen3) in f32 Eigen: embedding, RMSNorm,
// RoPE, grouped-query attention over a KV cache, SwiGLU MLP, tied or separate output head.
//
// Weights are dequantized once at load into row-major f32 matrices, so one projection is one Eigen
// matrix-vector product per decoded token. q/k/v are stacked into one matrix and gate/up into another:
// one pass over the input instead of three and two. decode() allocates nothing.
class llama {
 public:
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using vector = Eigen::VectorXf;

  template <io::weight_source S>
  static llama load(const S& source, load_options options = {});

  const llama_config& config() const noexcept { return config_; }
  std::int64_t vocab() const noexcept { return config_.vocab; }
  std::int64_t context() const noexcept { return cache_.context(); }
  std::int64_t position() const noexcept { return cache_.size(); }  // tokens in the KV cache
  void reset() noexcept { cache_.clear(); }
  // Copies share the (read-only) weights and get their own KV cache and scratch: a copy is one more
  // sequence for the cost of its cache, as an engine runs many requests over one model.
  bool shares_weights_with(const llama& other) const noexcept { return weights_ == other.weights_; }

  // Runs `tokens` after whatever the cache holds (reset() first for a new sequence), with batched
  // matrix products. Returns the logits of the last position (vocab() floats), or with all_positions
  // those of every position (tokens.size() rows of vocab(), row-major). The span stays valid until the
  // next prefill/decode. Throws std::out_of_range for a token outside the vocabulary and
  // std::length_error when the cache would overflow; the cache is unchanged then.
  std::span<const float> prefill(std::span<const std::int32_t> tokens, bool all_positions = false);

  // Appends one token and returns the next-token logits (vocab() floats). Allocates nothing.
  std::span<const float> decode(std::int32_t token);

 private:
  struct layer {
    vector attn_norm;
    matrix wqkv;            // [q_dim + 2 kv_dim, hidden]: q rows, then k rows, then v rows
    vector bqkv;            // empty without qkv_bias
    vector q_norm, k_norm;  // [head_dim]; empty without qk_norm
    matrix wo;              // [hidden, q_dim]
    vector ffn_norm;
    matrix w_gate_up;  // [2 intermediate, hidden]: gate rows, then up rows
    matrix w_down;     // [hidden, intermediate]
  };

  // Prefill works on chunks of this many tokens so that its scratch stays bounded.
  static constexpr std::int64_t prefill_chunk = 256;

  template <class Names, class S>
  void load_weights(const S& source, const std::string& file);

  const matrix& head() const noexcept { return config_.tied_embeddings ? weights_->embed : weights_->output; }
  void check_tokens(std::span<const std::int32_t> tokens) const;
  void set_rope_angles(std::int64_t pos, float* cos, float* sin) const noexcept;
  // logits_out: the chunk's rows of all-position logits; nullptr: only the last row's, into logits_,
  // and only when last_chunk.
  void prefill_chunk_at(std::span<const std::int32_t> tokens, float* logits_out, bool last_chunk);

  llama_config config_;
  // Read-only after load, and shared by copies: each copy is one more sequence (its own KV cache and
  // scratch) over the same weights.
  struct weights {
    matrix embed;   // [vocab, hidden]
    matrix output;  // [vocab, hidden]; empty when tied
    vector output_norm;
    std::vector<layer> layers;
  };
  std::shared_ptr<const weights> weights_;
  kv_cache cache_;
  std::vector<double> inv_freq_;  // [head_dim / 2]

  // decode() scratch, sized at load.
  vector x_, h_, qkv_, attn_, gate_up_, act_, scores_, cos_, sin_;
  vector logits_;
  matrix all_logits_;
};

namespace detail {

// out = x / rms(x) * w over n floats. out may alias x.
inline void rms_norm(const float* x, const float* w, std::int64_t n, float eps, float* out) noexcept {
  Eigen::Map<const Eigen::ArrayXf> xs(x, n);
  const float inv = 1.0f / std::sqrt(xs.square().sum() / static_cast<float>(n) + eps);
  Eigen::Map<Eigen::ArrayXf>(out, n) = xs * inv * Eigen::Map<const Eigen::ArrayXf>(w, n);
}

// Rotate-half RoPE of one head in place: dimension i pairs with i + d/2.
inline void rope_rotate_half(float* x, const float* cos, const float* sin, std::int64_t half) noexcept {
  for (std::int64_t i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

// In place over n floats; the caller keeps exp's argument finite.
inline void softmax(float* s, std::int64_t n) noexcept {
  Eigen::Map<Eigen::ArrayXf> a(s, n);
  const float m = a.maxCoeff();
  a = (a - m).exp();
  a *= 1.0f / a.sum();
}

// act = silu(gate) * up over n floats.
inline void swiglu(const float* gate, const float* up, std::int64_t n, float* act) noexcept {
  Eigen::Map<const Eigen::ArrayXf> g(gate, n);
  Eigen::Map<Eigen::ArrayXf>(act, n) = g / (1.0f + (-g).exp()) * Eigen::Map<const Eigen::ArrayXf>(up, n);
}

template <class S>
class weight_reader {
 public:
  weight_reader(const S& source, const std::string& file) : source_(source), file_(file) {}

  // The tensor, checked against the shape the config implies.
  const io::tensor_view& get(const std::string& name, std::vector<std::int64_t> shape) const {
    const io::tensor_view* t = source_.find_tensor(name);
    if (t == nullptr) throw io::format_error(file_, "tensor '" + name + "'", "missing");
    if (t->shape != shape) {
      throw io::format_error(
          file_, "tensor '" + name + "'",
          "shape " + to_string(t->shape) + " does not match the config's " + to_string(shape));
    }
    return *t;
  }
  bool has(std::string_view name) const { return source_.find_tensor(name) != nullptr; }

 private:
  static std::string to_string(const std::vector<std::int64_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  }

  const S& source_;
  const std::string& file_;
};

// GGUF llama stores each head's q/k rows in adjacent-pair order (llama.cpp's convert script permutes
// them); reorder to rotate-half so one RoPE kernel serves every layout. Attention only sees dot
// products of q and k, which the same permutation of both leaves unchanged.
inline void adjacent_to_rotate_half(float* rows, std::int64_t n_heads, std::int64_t head_dim,
                                    std::int64_t cols) {
  const std::int64_t half = head_dim / 2;
  std::vector<float> tmp(static_cast<std::size_t>(head_dim * cols));
  for (std::int64_t h = 0; h < n_heads; ++h) {
    float* head = rows + h * head_dim * cols;
    std::copy(head, head + head_dim * cols, tmp.begin());
    for (std::int64_t i = 0; i < half; ++i) {
      for (std::int64_t j = 0; j < 2; ++j) {
        const float* src = tmp.data() + (2 * i + j) * cols;
        std::copy(src, src + cols, head + (j * half + i) * cols);
      }
    }
  }
}

}  // namespace detail

template <io::weight_source S>
llama llama::load(const S& source, load_options options) {
  const std::string file(std::string_view(source.path()));
  llama m;
  m.config_ = read_config(source);
  const llama_config& c = m.config_;
  std::int64_t context = options.context;
  if (context == 0) context = std::min(c.max_seq, load_options::default_context);
  if (context < 1 || context > llama_config::max_context) {
    throw std::invalid_argument("nucleus::model::llama::load: context " + std::to_string(context) +
                                " outside [1, " + std::to_string(llama_config::max_context) + "]");
  }
  const std::int64_t cache_floats =
      detail::mul(detail::mul(detail::mul(2, c.n_layers, file, "kv cache"), context, file, "kv cache"),
                  c.kv_dim(), file, "kv cache");
  if (cache_floats > llama_config::max_parameters) {
    throw std::invalid_argument("nucleus::model::llama::load: a KV cache of " + std::to_string(context) +
                                " tokens exceeds the size cap");
  }

  if (source.find_metadata("general.architecture") != nullptr) {
    m.load_weights<gguf_names>(source, file);
  } else {
    m.load_weights<hf_names>(source, file);
  }

  m.cache_ = kv_cache(c.n_layers, c.n_kv_heads, c.head_dim, context);
  const std::int64_t half = c.head_dim / 2;
  m.inv_freq_.resize(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    m.inv_freq_[static_cast<std::size_t>(i)] =
        std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
  }
  m.x_.resize(c.hidden);
  m.h_.resize(c.hidden);
  m.qkv_.resize(c.q_dim() + 2 * c.kv_dim());
  m.attn_.resize(c.q_dim());
  m.gate_up_.resize(2 * c.intermediate);
  m.act_.resize(c.intermediate);
  m.scores_.resize(context);
  m.cos_.resize(half);
  m.sin_.resize(half);
  m.logits_.resize(c.vocab);
  return m;
}

template <class Names, class S>
void llama::load_weights(const S& source, const std::string& file) {
  const llama_config& c = config_;
  const detail::weight_reader<S> r(source, file);
  const std::int64_t H = c.hidden, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate;
  const bool permuted = c.rope == rope_style::adjacent_pairs;
  auto fresh = std::make_shared<weights>();
  weights& W = *fresh;

  // Every tensor is found and its shape checked before its buffer is allocated: the buffer is then
  // no larger than what the file holds, however large the config claims the model to be.
  auto tensor = [&](const std::string& name, std::vector<std::int64_t> shape) -> const io::tensor_view& {
    return r.get(name, std::move(shape));
  };
  auto fill = [](const io::tensor_view& t, float* out) {
    io::dequantize(t, std::span<float>(out, static_cast<std::size_t>(t.numel())));
  };

  const auto& embed = tensor(std::string(Names::embedding), {c.vocab, H});
  W.embed.resize(c.vocab, H);
  fill(embed, W.embed.data());
  if (!c.tied_embeddings) {
    const auto& output = tensor(std::string(Names::output), {c.vocab, H});
    W.output.resize(c.vocab, H);
    fill(output, W.output.data());
  }
  const auto& output_norm = tensor(std::string(Names::output_norm), {H});
  W.output_norm.resize(H);
  fill(output_norm, W.output_norm.data());

  // Layers are allocated one at a time, each after its tensors are found: a config claiming more
  // layers than the file holds fails at the first missing one.
  W.layers.reserve(static_cast<std::size_t>(c.n_layers));
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    auto name = [&](std::string_view leaf) { return Names::layer(i, leaf); };
    const auto& attn_norm = tensor(name(Names::attn_norm), {H});
    const auto& q = tensor(name(Names::q), {qd, H});
    const auto& k = tensor(name(Names::k), {kvd, H});
    const auto& v = tensor(name(Names::v), {kvd, H});
    const auto& o = tensor(name(Names::o), {H, qd});
    const auto& ffn_norm = tensor(name(Names::ffn_norm), {H});
    const auto& gate = tensor(name(Names::gate), {I, H});
    const auto& up = tensor(name(Names::up), {I, H});
    const auto& down = tensor(name(Names::down), {H, I});
    layer& L = W.layers.emplace_back();
    L.attn_norm.resize(H);
    fill(attn_norm, L.attn_norm.data());
    L.wqkv.resize(qd + 2 * kvd, H);
    fill(q, L.wqkv.row(0).data());
    fill(k, L.wqkv.row(qd).data());
    fill(v, L.wqkv.row(qd + kvd).data());
    if (permuted) {
      detail::adjacent_to_rotate_half(L.wqkv.row(0).data(), c.n_heads, hd, H);
      detail::adjacent_to_rotate_half(L.wqkv.row(qd).data(), c.n_kv_heads, hd, H);
    }
    if (c.qkv_bias) {
      const auto& q_bias = tensor(name(Names::q_bias), {qd});
      const auto& k_bias = tensor(name(Names::k_bias), {kvd});
      const auto& v_bias = tensor(name(Names::v_bias), {kvd});
      L.bqkv.resize(qd + 2 * kvd);
      fill(q_bias, L.bqkv.data());
      fill(k_bias, L.bqkv.data() + qd);
      fill(v_bias, L.bqkv.data() + qd + kvd);
      if (permuted) {
        detail::adjacent_to_rotate_half(L.bqkv.data(), c.n_heads, hd, 1);
        detail::adjacent_to_rotate_half(L.bqkv.data() + qd, c.n_kv_heads, hd, 1);
      }
    }
    if (c.qk_norm) {
      const auto& q_norm = tensor(name(Names::q_norm), {hd});
      const auto& k_norm = tensor(name(Names::k_norm), {hd});
      L.q_norm.resize(hd);
      L.k_norm.resize(hd);
      fill(q_norm, L.q_norm.data());
      fill(k_norm, L.k_norm.data());
      if (permuted) {
        detail::adjacent_to_rotate_half(L.q_norm.data(), 1, hd, 1);
        detail::adjacent_to_rotate_half(L.k_norm.data(), 1, hd, 1);
      }
    }
    L.wo.resize(H, qd);
    fill(o, L.wo.data());
    L.ffn_norm.resize(H);
    fill(ffn_norm, L.ffn_norm.data());
    L.w_gate_up.resize(2 * I, H);
    fill(gate, L.w_gate_up.row(0).data());
    fill(up, L.w_gate_up.row(I).data());
    L.w_down.resize(H, I);
    fill(down, L.w_down.data());
  }
  weights_ = std::move(fresh);
}

inline void llama::check_tokens(std::span<const std::int32_t> tokens) const {
  for (std::int32_t t : tokens) {
    if (t < 0 || t >= config_.vocab) {
      throw std::out_of_range("nucleus::model::llama: token " + std::to_string(t) +
                              " outside the vocabulary of " + std::to_string(config_.vocab));
    }
  }
  if (static_cast<std::int64_t>(tokens.size()) > cache_.context() - cache_.size()) {
    throw std::length_error("nucleus::model::llama: " + std::to_string(tokens.size()) + " tokens after " +
                            std::to_string(cache_.size()) + " overflow a context of " +
                            std::to_string(cache_.context()));
  }
}

inline void llama::set_rope_angles(std::int64_t pos, float* cos, float* sin) const noexcept {
  // Angles in double: pos * theta^(-2i/d) loses digits in float at long positions.
  for (std::size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    cos[i] = static_cast<float>(std::cos(a));
    sin[i] = static_cast<float>(std::sin(a));
  }
}

inline std::span<const float> llama::decode(std::int32_t token) {
  check_tokens(std::span<const std::int32_t>(&token, 1));
  const llama_config& c = config_;
  const std::int64_t H = c.hidden, hd = c.head_dim, half = hd / 2, qd = c.q_dim(), kvd = c.kv_dim();
  const std::int64_t I = c.intermediate, group = c.n_heads / c.n_kv_heads;
  const std::int64_t pos = cache_.size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  set_rope_angles(pos, cos_.data(), sin_.data());

  x_ = weights_->embed.row(token).transpose();
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const layer& L = weights_->layers[static_cast<std::size_t>(l)];
    detail::rms_norm(x_.data(), L.attn_norm.data(), H, c.rms_eps, h_.data());
    qkv_.noalias() = L.wqkv * h_;
    if (c.qkv_bias) qkv_ += L.bqkv;
    float* q = qkv_.data();
    float* k = q + qd;
    const float* v = k + kvd;
    for (std::int64_t h = 0; h < c.n_heads; ++h) {
      if (c.qk_norm) detail::rms_norm(q + h * hd, L.q_norm.data(), hd, c.rms_eps, q + h * hd);
      detail::rope_rotate_half(q + h * hd, cos_.data(), sin_.data(), half);
      Eigen::Map<vector>(q + h * hd, hd) *= scale;  // here, not on the scores: Eigen would need a temporary
    }
    for (std::int64_t g = 0; g < c.n_kv_heads; ++g) {
      if (c.qk_norm) detail::rms_norm(k + g * hd, L.k_norm.data(), hd, c.rms_eps, k + g * hd);
      detail::rope_rotate_half(k + g * hd, cos_.data(), sin_.data(), half);
      std::copy(k + g * hd, k + (g + 1) * hd, cache_.key_row(l, g, pos));
      std::copy(v + g * hd, v + (g + 1) * hd, cache_.value_row(l, g, pos));
    }
    for (std::int64_t h = 0; h < c.n_heads; ++h) {
      const std::int64_t g = h / group;
      auto s = scores_.head(pos + 1);
      s.noalias() = cache_.keys(l, g, pos + 1) * Eigen::Map<const vector>(q + h * hd, hd);
      detail::softmax(s.data(), pos + 1);
      attn_.segment(h * hd, hd).noalias() = cache_.values(l, g, pos + 1).transpose() * s;
    }
    x_.noalias() += L.wo * attn_;
    detail::rms_norm(x_.data(), L.ffn_norm.data(), H, c.rms_eps, h_.data());
    gate_up_.noalias() = L.w_gate_up * h_;
    detail::swiglu(gate_up_.data(), gate_up_.data() + I, I, act_.data());
    x_.noalias() += L.w_down * act_;
  }
  cache_.advance(1);
  detail::rms_norm(x_.data(), weights_->output_norm.data(), H, c.rms_eps, h_.data());
  logits_.noalias() = head() * h_;
  return {logits_.data(), static_cast<std::size_t>(c.vocab)};
}

inline std::span<const float> llama::prefill(std::span<const std::int32_t> tokens, bool all_positions) {
  check_tokens(tokens);
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) throw std::invalid_argument("nucleus::model::llama::prefill: no tokens");
  if (all_positions) all_logits_.resize(n, config_.vocab);
  for (std::int64_t off = 0; off < n; off += prefill_chunk) {
    const std::int64_t m = std::min(prefill_chunk, n - off);
    prefill_chunk_at(tokens.subspan(static_cast<std::size_t>(off), static_cast<std::size_t>(m)),
                     all_positions ? all_logits_.row(off).data() : nullptr, off + m == n);
  }
  if (all_positions) return {all_logits_.data(), static_cast<std::size_t>(n * config_.vocab)};
  return {logits_.data(), static_cast<std::size_t>(config_.vocab)};
}

inline void llama::prefill_chunk_at(std::span<const std::int32_t> tokens, float* logits_out,
                                    bool last_chunk) {
  const llama_config& c = config_;
  const std::int64_t H = c.hidden, hd = c.head_dim, half = hd / 2, qd = c.q_dim(), kvd = c.kv_dim();
  const std::int64_t I = c.intermediate, group = c.n_heads / c.n_kv_heads;
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t p0 = cache_.size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  matrix cos(n, half), sin(n, half);
  for (std::int64_t t = 0; t < n; ++t) set_rope_angles(p0 + t, cos.row(t).data(), sin.row(t).data());

  matrix X(n, H), Hn(n, H), QKV(n, qd + 2 * kvd), ATT(n, qd), GU(n, 2 * I), ACT(n, I), S(n, p0 + n);
  for (std::int64_t t = 0; t < n; ++t) X.row(t) = weights_->embed.row(tokens[static_cast<std::size_t>(t)]);
  for (std::int64_t l = 0; l < c.n_layers; ++l) {
    const layer& L = weights_->layers[static_cast<std::size_t>(l)];
    for (std::int64_t t = 0; t < n; ++t) {
      detail::rms_norm(X.row(t).data(), L.attn_norm.data(), H, c.rms_eps, Hn.row(t).data());
    }
    QKV.noalias() = Hn * L.wqkv.transpose();
    if (c.qkv_bias) QKV.rowwise() += L.bqkv.transpose();
    for (std::int64_t t = 0; t < n; ++t) {
      float* q = QKV.row(t).data();
      float* k = q + qd;
      const float* v = k + kvd;
      for (std::int64_t h = 0; h < c.n_heads; ++h) {
        if (c.qk_norm) detail::rms_norm(q + h * hd, L.q_norm.data(), hd, c.rms_eps, q + h * hd);
        detail::rope_rotate_half(q + h * hd, cos.row(t).data(), sin.row(t).data(), half);
        Eigen::Map<vector>(q + h * hd, hd) *= scale;
      }
      for (std::int64_t g = 0; g < c.n_kv_heads; ++g) {
        if (c.qk_norm) detail::rms_norm(k + g * hd, L.k_norm.data(), hd, c.rms_eps, k + g * hd);
        detail::rope_rotate_half(k + g * hd, cos.row(t).data(), sin.row(t).data(), half);
        std::copy(k + g * hd, k + (g + 1) * hd, cache_.key_row(l, g, p0 + t));
        std::copy(v + g * hd, v + (g + 1) * hd, cache_.value_row(l, g, p0 + t));
      }
    }
    for (std::int64_t h = 0; h < c.n_heads; ++h) {
      const std::int64_t g = h / group;
      S.noalias() = QKV.middleCols(h * hd, hd) * cache_.keys(l, g, p0 + n).transpose();
      for (std::int64_t t = 0; t < n; ++t) {  // causal: position p0 + t sees keys 0 .. p0 + t
        detail::softmax(S.row(t).data(), p0 + t + 1);
        S.row(t).tail(n - 1 - t).setZero();
      }
      ATT.middleCols(h * hd, hd).noalias() = S * cache_.values(l, g, p0 + n);
    }
    X.noalias() += ATT * L.wo.transpose();
    for (std::int64_t t = 0; t < n; ++t) {
      detail::rms_norm(X.row(t).data(), L.ffn_norm.data(), H, c.rms_eps, Hn.row(t).data());
    }
    GU.noalias() = Hn * L.w_gate_up.transpose();
    for (std::int64_t t = 0; t < n; ++t) {
      detail::swiglu(GU.row(t).data(), GU.row(t).data() + I, I, ACT.row(t).data());
    }
    X.noalias() += ACT * L.w_down.transpose();
  }
  cache_.advance(n);
  if (logits_out != nullptr) {
    for (std::int64_t t = 0; t < n; ++t) {
      detail::rms_norm(X.row(t).data(), weights_->output_norm.data(), H, c.rms_eps, Hn.row(t).data());
    }
    Eigen::Map<matrix>(logits_out, n, c.vocab).noalias() = Hn * head().transpose();
  } else if (last_chunk) {
    detail::rms_norm(X.row(n - 1).data(), weights_->output_norm.data(), H, c.rms_eps, h_.data());
    logits_.noalias() = head() * h_;
  }
}

}  // namespace nucleus::model
