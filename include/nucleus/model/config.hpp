// Llama-family hyperparameters, read and validated from GGUF metadata or a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nucleus/io/io.hpp"
#include "nucleus/model/tensor_names.hpp"

namespace nucleus::model {

enum class architecture { llama, qwen2, qwen3 };

constexpr std::string_view name(architecture a) {
  switch (a) {
    case architecture::llama:
      return "llama";
    case architecture::qwen2:
      return "qwen2";
    case architecture::qwen3:
      return "qwen3";
  }
  return "unknown";
}

// Which dimensions of a head RoPE rotates together. Hugging Face checkpoints rotate (i, i + d/2)
// ("rotate half", llama.cpp's NEOX); llama.cpp's convert script permutes the Q/K rows of llama-arch
// models so that GGUF llama rotates adjacent pairs (2i, 2i + 1) (llama.cpp's NORM). GGUF qwen2/qwen3
// are not permuted and stay rotate-half.
enum class rope_style { adjacent_pairs, rotate_half };

// Hyperparameters of a Llama-family decoder. Dimensions are int64 because they come from untrusted
// files and feed size arithmetic; validate() bounds them.
struct llama_config {
  architecture arch = architecture::llama;
  std::int64_t vocab = 0;
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;
  std::int64_t n_layers = 0;
  std::int64_t n_heads = 0;
  std::int64_t n_kv_heads = 0;
  std::int64_t head_dim = 0;
  double rope_theta = 10000.0;
  float rms_eps = 1e-5f;
  std::int64_t max_seq = 0;  // the context length the model was trained for
  bool tied_embeddings = false;
  bool qkv_bias = false;  // Qwen2: biases on the q, k and v projections
  bool qk_norm = false;   // Qwen3: RMSNorm over each q and k head before RoPE
  rope_style rope = rope_style::rotate_half;

  std::int64_t q_dim() const { return n_heads * head_dim; }
  std::int64_t kv_dim() const { return n_kv_heads * head_dim; }

  // Caps far above any Llama-family model of today, far below what would exhaust memory by accident.
  static constexpr std::int64_t max_dimension = std::int64_t{1} << 20;
  static constexpr std::int64_t max_layers = 1024;
  static constexpr std::int64_t max_head_dim = 1024;
  static constexpr std::int64_t max_context = std::int64_t{1} << 24;
  static constexpr std::int64_t max_parameters = std::int64_t{1} << 33;  // 32 GiB of f32 weights

  // The f32 elements the weights take; throws format_error on overflow.
  std::int64_t parameter_count(std::string_view file = "config") const;

  // Throws io::format_error naming `file` and the offending field.
  void validate(std::string_view file) const;
};

namespace detail {

[[noreturn]] inline void config_error(std::string_view file, std::string_view field, std::string_view what) {
  throw io::format_error(std::string(file), std::string(field), what);
}

inline std::int64_t mul(std::int64_t a, std::int64_t b, std::string_view file, std::string_view what) {
  auto r = io::detail::checked_mul(a, b);
  if (!r) config_error(file, what, "size overflows int64");
  return *r;
}

inline std::int64_t add(std::int64_t a, std::int64_t b, std::string_view file, std::string_view what) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) config_error(file, what, "size overflows int64");
  return r;
}

}  // namespace detail

inline std::int64_t llama_config::parameter_count(std::string_view file) const {
  using detail::add;
  using detail::mul;
  const std::string_view w = "parameter count";
  const std::int64_t qkv = add(q_dim(), mul(2, kv_dim(), file, w), file, w);
  std::int64_t per_layer = mul(qkv, hidden, file, w);
  per_layer = add(per_layer, mul(hidden, q_dim(), file, w), file, w);
  per_layer = add(per_layer, mul(mul(3, intermediate, file, w), hidden, file, w), file, w);
  per_layer =
      add(per_layer, add(mul(2, hidden, file, w), add(qkv, mul(2, head_dim, file, w), file, w), file, w),
          file, w);
  std::int64_t total = mul(per_layer, n_layers, file, w);
  const std::int64_t embed = mul(vocab, hidden, file, w);
  total = add(total, mul(tied_embeddings ? 1 : 2, embed, file, w), file, w);
  return add(total, hidden, file, w);
}

inline void llama_config::validate(std::string_view file) const {
  auto in_range = [&](std::string_view field, std::int64_t v, std::int64_t hi) {
    if (v < 1 || v > hi) {
      detail::config_error(file, field,
                           "value " + std::to_string(v) + " outside [1, " + std::to_string(hi) + "]");
    }
  };
  in_range("vocab", vocab, max_dimension * 4);
  in_range("hidden", hidden, max_dimension);
  in_range("intermediate", intermediate, max_dimension);
  in_range("n_layers", n_layers, max_layers);
  in_range("n_heads", n_heads, max_dimension);
  in_range("n_kv_heads", n_kv_heads, n_heads);
  in_range("head_dim", head_dim, max_head_dim);
  in_range("max_seq", max_seq, max_context);
  if (n_heads % n_kv_heads != 0) {
    detail::config_error(
        file, "n_kv_heads",
        "n_heads (" + std::to_string(n_heads) + ") is not a multiple of " + std::to_string(n_kv_heads));
  }
  if (head_dim % 2 != 0) detail::config_error(file, "head_dim", "RoPE needs an even head dimension");
  if (!(rope_theta > 1.0) || !(rope_theta < 1e12)) detail::config_error(file, "rope_theta", "out of range");
  if (!(rms_eps > 0.0f) || !(rms_eps < 1.0f)) detail::config_error(file, "rms_eps", "out of range");
  if (parameter_count(file) > max_parameters) {
    detail::config_error(file, "parameter count",
                         "exceeds " + std::to_string(max_parameters) + " f32 values");
  }
}

namespace detail {

inline std::optional<architecture> parse_architecture(std::string_view s) {
  if (s == "llama" || s == "LlamaForCausalLM" || s == "smollm") return architecture::llama;
  if (s == "qwen2" || s == "Qwen2ForCausalLM") return architecture::qwen2;
  if (s == "qwen3" || s == "Qwen3ForCausalLM") return architecture::qwen3;
  return std::nullopt;
}

template <io::weight_source S>
bool has_tensor(const S& s, std::string_view name) {
  return s.find_tensor(name) != nullptr;
}

template <io::weight_source S>
llama_config read_gguf_config(const S& s, std::string_view file) {
  const std::string arch_name = io::require_string(s, "general.architecture");
  const auto arch = parse_architecture(arch_name);
  if (!arch)
    config_error(file, "metadata key 'general.architecture'", "unsupported architecture '" + arch_name + "'");
  const std::string p = arch_name + ".";
  auto key = [&](std::string_view k) { return p + std::string(k); };
  llama_config c;
  c.arch = *arch;
  c.hidden = io::require_int(s, key("embedding_length"));
  c.intermediate = io::require_int(s, key("feed_forward_length"));
  c.n_layers = io::require_int(s, key("block_count"));
  c.n_heads = io::require_int(s, key("attention.head_count"));
  c.n_kv_heads = io::get_int(s, key("attention.head_count_kv")).value_or(c.n_heads);
  c.max_seq = io::require_int(s, key("context_length"));
  c.rope_theta = io::get_float(s, key("rope.freq_base")).value_or(10000.0);
  c.rms_eps = static_cast<float>(io::require_float(s, key("attention.layer_norm_rms_epsilon")));
  // head_dim differs from hidden / n_heads in Qwen3; llama.cpp calls it the key length.
  if (c.n_heads >= 1) c.head_dim = io::get_int(s, key("attention.key_length")).value_or(c.hidden / c.n_heads);
  if (auto v = io::get_int(s, key("attention.value_length")); v && *v != c.head_dim) {
    config_error(file, "metadata key '" + key("attention.value_length") + "'", "differs from the key length");
  }
  if (auto r = io::get_int(s, key("rope.dimension_count")); r && *r != c.head_dim) {
    config_error(file, "metadata key '" + key("rope.dimension_count") + "'",
                 "partial rotary embeddings are not supported");
  }
  if (auto t = io::get_string(s, key("rope.scaling.type")); t && *t != "none") {
    config_error(file, "metadata key '" + key("rope.scaling.type") + "'",
                 "RoPE scaling '" + *t + "' is not supported");
  }
  if (has_tensor(s, "rope_freqs.weight")) {
    config_error(file, "tensor 'rope_freqs.weight'", "per-frequency RoPE factors are not supported");
  }
  // vocab_size is optional in GGUF; the embedding's outer dimension is the truth.
  const io::tensor_view* embed = s.find_tensor(gguf_names::embedding);
  if (embed == nullptr) config_error(file, "tensor '" + std::string(gguf_names::embedding) + "'", "missing");
  if (embed->shape.size() != 2)
    config_error(file, "tensor '" + std::string(gguf_names::embedding) + "'", "not 2-D");
  c.vocab = io::get_int(s, key("vocab_size")).value_or(embed->shape[0]);
  c.tied_embeddings = !has_tensor(s, gguf_names::output);
  c.qkv_bias = has_tensor(s, gguf_names::layer(0, "attn_q.bias"));
  c.qk_norm = c.arch == architecture::qwen3;
  c.rope = c.arch == architecture::llama ? rope_style::adjacent_pairs : rope_style::rotate_half;
  return c;
}

template <io::weight_source S>
llama_config read_hf_config(const S& s, std::string_view file) {
  const std::string type = io::require_string(s, "model_type");
  const auto arch = parse_architecture(type);
  if (!arch) config_error(file, "config key 'model_type'", "unsupported model type '" + type + "'");
  llama_config c;
  c.arch = *arch;
  c.vocab = io::require_int(s, "vocab_size");
  c.hidden = io::require_int(s, "hidden_size");
  c.intermediate = io::require_int(s, "intermediate_size");
  c.n_layers = io::require_int(s, "num_hidden_layers");
  c.n_heads = io::require_int(s, "num_attention_heads");
  c.n_kv_heads = io::get_int(s, "num_key_value_heads").value_or(c.n_heads);
  if (c.n_heads >= 1) c.head_dim = io::get_int(s, "head_dim").value_or(c.hidden / c.n_heads);
  c.max_seq = io::require_int(s, "max_position_embeddings");
  c.rope_theta = io::get_float(s, "rope_theta").value_or(10000.0);
  c.rms_eps = static_cast<float>(io::get_float(s, "rms_norm_eps").value_or(1e-6));
  // A rope_scaling object (Llama 3.1 and later, YaRN) changes the frequencies; refuse rather than drift.
  // (safetensors_file flattens the object into dotted keys and drops nulls.)
  for (std::string_view k :
       {"rope_scaling", "rope_scaling.type", "rope_scaling.rope_type", "rope_scaling.factor"}) {
    if (s.find_metadata(k) != nullptr) {
      config_error(file, "config key '" + std::string(k) + "'", "RoPE scaling is not supported");
    }
  }
  c.tied_embeddings = io::get_bool(s, "tie_word_embeddings").value_or(false);
  c.qkv_bias = c.arch == architecture::qwen2 || io::get_bool(s, "attention_bias").value_or(false);
  c.qk_norm = c.arch == architecture::qwen3;
  c.rope = rope_style::rotate_half;
  return c;
}

}  // namespace detail

// Reads the hyperparameters from GGUF metadata (general.architecture, then `<arch>.*` keys) or from a
// Hugging Face config.json (model_type, ...), and validates them. Throws io::format_error naming the
// file and the key.
template <io::weight_source S>
llama_config read_config(const S& source) {
  const std::string file(std::string_view(source.path()));
  llama_config c;
  if (source.find_metadata("general.architecture") != nullptr) {
    c = detail::read_gguf_config(source, file);
  } else if (source.find_metadata("model_type") != nullptr) {
    c = detail::read_hf_config(source, file);
  } else {
    detail::config_error(file, "metadata",
                         "neither 'general.architecture' (GGUF) nor 'model_type' (config.json)");
  }
  c.validate(file);
  return c;
}

}  // namespace nucleus::model
