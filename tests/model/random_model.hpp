#pragma once

// Tiny random Llama-family models in an io::memory_source, in Hugging Face or GGUF layout, for the
// tests that need no Python. The same seed gives the same weights in both layouts.

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nucleus/io/io.hpp>
#include <nucleus/model/tensor_names.hpp>

namespace nucleus::test {

struct tiny_spec {
  std::string arch = "llama";
  std::int64_t vocab = 61, hidden = 32, intermediate = 48, n_layers = 2, n_heads = 4, n_kv_heads = 2,
               head_dim = 8, max_seq = 64;
  bool tied = true, qkv_bias = false, qk_norm = false;
  double rope_theta = 10000.0, rms_eps = 1e-5;
};

// A weight source over owned f32 vectors. (Not io::memory_source, so that these tests exercise the
// weight_source concept with a type of their own.)
class test_source {
 public:
  explicit test_source(std::string name) : name_(std::move(name)) {}
  test_source(test_source&&) = default;

  void add_tensor(const std::string& name, std::vector<std::int64_t> shape, std::vector<float> values) {
    const auto& kept = values_.emplace_back(std::move(values));
    tensors_.insert_or_assign(name, io::tensor_view{name, std::move(shape), io::dtype::f32,
                                                    std::as_bytes(std::span<const float>(kept))});
  }
  void set_metadata(const std::string& key, io::metadata_value v) {
    metadata_.insert_or_assign(key, std::move(v));
  }

  const io::tensor_view* find_tensor(std::string_view name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const io::metadata_value* find_metadata(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
  }
  std::string_view path() const { return name_; }
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : tensors_) out.push_back(k);
    return out;
  }

 private:
  std::string name_;
  std::deque<std::vector<float>> values_;  // a deque: moving the source keeps the views valid
  std::map<std::string, io::tensor_view, std::less<>> tensors_;
  std::map<std::string, io::metadata_value, std::less<>> metadata_;
};
static_assert(io::weight_source<test_source>);

// Canonical (Hugging Face order) weights keyed by a layout-free name.
struct tiny_weights {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<std::int64_t>> shapes;
};

inline tiny_weights make_weights(const tiny_spec& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  tiny_weights w;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float mean, float stddev) {
    std::normal_distribution<float> d(mean, stddev);
    std::int64_t n = 1;
    for (auto x : shape) n *= x;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = d(rng);
    w.values[name] = std::move(v);
    w.shapes[name] = std::move(shape);
  };
  const std::int64_t H = s.hidden, qd = s.n_heads * s.head_dim, kvd = s.n_kv_heads * s.head_dim;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(H));
  add("embed", {s.vocab, H}, 0.0f, 1.0f);
  add("norm", {H}, 1.0f, 0.1f);
  if (!s.tied) add("output", {s.vocab, H}, 0.0f, in_scale);
  for (std::int64_t i = 0; i < s.n_layers; ++i) {
    const std::string p = std::to_string(i) + ".";
    add(p + "attn_norm", {H}, 1.0f, 0.1f);
    add(p + "q", {qd, H}, 0.0f, in_scale);
    add(p + "k", {kvd, H}, 0.0f, in_scale);
    add(p + "v", {kvd, H}, 0.0f, in_scale);
    if (s.qkv_bias) {
      add(p + "bq", {qd}, 0.0f, 0.5f);
      add(p + "bk", {kvd}, 0.0f, 0.5f);
      add(p + "bv", {kvd}, 0.0f, 0.5f);
    }
    if (s.qk_norm) {
      add(p + "q_norm", {s.head_dim}, 1.0f, 0.1f);
      add(p + "k_norm", {s.head_dim}, 1.0f, 0.1f);
    }
    add(p + "o", {H, qd}, 0.0f, 1.0f / std::sqrt(static_cast<float>(qd)));
    add(p + "ffn_norm", {H}, 1.0f, 0.1f);
    add(p + "gate", {s.intermediate, H}, 0.0f, in_scale);
    add(p + "up", {s.intermediate, H}, 0.0f, in_scale);
    add(p + "down", {H, s.intermediate}, 0.0f, 1.0f / std::sqrt(static_cast<float>(s.intermediate)));
  }
  return w;
}

// llama.cpp's convert_hf_to_gguf.py LlamaModel.permute, written from its numpy one-liner:
// reshape(n_head, 2, d/2, cols).swapaxes(1, 2): row (h, j, i) moves to (h, i, j).
inline std::vector<float> permute_for_gguf(const std::vector<float>& a, std::int64_t n_head,
                                           std::int64_t cols) {
  const std::int64_t rows = static_cast<std::int64_t>(a.size()) / cols, half = rows / n_head / 2;
  std::vector<float> out(a.size());
  for (std::int64_t h = 0; h < n_head; ++h) {
    for (std::int64_t j = 0; j < 2; ++j) {
      for (std::int64_t i = 0; i < half; ++i) {
        const std::int64_t from = (h * 2 + j) * half + i, to = (h * half + i) * 2 + j;
        std::copy_n(a.begin() + from * cols, cols, out.begin() + to * cols);
      }
    }
  }
  return out;
}

template <class Names>
std::string layout_name(const std::string& canonical) {
  static const std::map<std::string, std::string_view> leaf = {{"attn_norm", Names::attn_norm},
                                                               {"q", Names::q},
                                                               {"k", Names::k},
                                                               {"v", Names::v},
                                                               {"bq", Names::q_bias},
                                                               {"bk", Names::k_bias},
                                                               {"bv", Names::v_bias},
                                                               {"q_norm", Names::q_norm},
                                                               {"k_norm", Names::k_norm},
                                                               {"o", Names::o},
                                                               {"ffn_norm", Names::ffn_norm},
                                                               {"gate", Names::gate},
                                                               {"up", Names::up},
                                                               {"down", Names::down}};
  if (canonical == "embed") return std::string(Names::embedding);
  if (canonical == "norm") return std::string(Names::output_norm);
  if (canonical == "output") return std::string(Names::output);
  const auto dot = canonical.find('.');
  return Names::layer(std::stoll(canonical.substr(0, dot)), leaf.at(canonical.substr(dot + 1)));
}

inline test_source make_hf_model(const tiny_spec& s, std::uint32_t seed, std::string name = "tiny-hf") {
  test_source src(std::move(name));
  const tiny_weights w = make_weights(s, seed);
  for (const auto& [k, v] : w.values) src.add_tensor(layout_name<model::hf_names>(k), w.shapes.at(k), v);
  src.set_metadata("model_type", s.arch);
  src.set_metadata("vocab_size", s.vocab);
  src.set_metadata("hidden_size", s.hidden);
  src.set_metadata("intermediate_size", s.intermediate);
  src.set_metadata("num_hidden_layers", s.n_layers);
  src.set_metadata("num_attention_heads", s.n_heads);
  src.set_metadata("num_key_value_heads", s.n_kv_heads);
  src.set_metadata("head_dim", s.head_dim);
  src.set_metadata("max_position_embeddings", s.max_seq);
  src.set_metadata("rope_theta", s.rope_theta);
  src.set_metadata("rms_norm_eps", s.rms_eps);
  src.set_metadata("tie_word_embeddings", s.tied);
  if (s.arch == "llama") src.set_metadata("attention_bias", s.qkv_bias);
  return src;
}

inline test_source make_gguf_model(const tiny_spec& s, std::uint32_t seed, std::string name = "tiny-gguf") {
  test_source src(std::move(name));
  const tiny_weights w = make_weights(s, seed);
  const bool permute = s.arch == "llama";
  for (const auto& [k, v] : w.values) {
    const auto& shape = w.shapes.at(k);
    const std::int64_t cols = shape.size() == 2 ? shape[1] : 1;
    const bool is_q = k.ends_with(".q") || k.ends_with(".bq"), is_k = k.ends_with(".k") || k.ends_with(".bk");
    std::vector<float> stored = v;
    if (permute && is_q) stored = permute_for_gguf(v, s.n_heads, cols);
    if (permute && is_k) stored = permute_for_gguf(v, s.n_kv_heads, cols);
    src.add_tensor(layout_name<model::gguf_names>(k), shape, std::move(stored));
  }
  const std::string p = s.arch + ".";
  src.set_metadata("general.architecture", s.arch);
  src.set_metadata(p + "vocab_size", static_cast<std::uint32_t>(s.vocab));
  src.set_metadata(p + "embedding_length", static_cast<std::uint32_t>(s.hidden));
  src.set_metadata(p + "feed_forward_length", static_cast<std::uint32_t>(s.intermediate));
  src.set_metadata(p + "block_count", static_cast<std::uint32_t>(s.n_layers));
  src.set_metadata(p + "attention.head_count", static_cast<std::uint32_t>(s.n_heads));
  src.set_metadata(p + "attention.head_count_kv", static_cast<std::uint32_t>(s.n_kv_heads));
  if (s.head_dim * s.n_heads != s.hidden) {
    src.set_metadata(p + "attention.key_length", static_cast<std::uint32_t>(s.head_dim));
  }
  src.set_metadata(p + "context_length", static_cast<std::uint32_t>(s.max_seq));
  src.set_metadata(p + "rope.freq_base", static_cast<float>(s.rope_theta));
  src.set_metadata(p + "attention.layer_norm_rms_epsilon", static_cast<float>(s.rms_eps));
  return src;
}

}  // namespace nucleus::test
