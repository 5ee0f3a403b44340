// A model of a real checkpoint's shapes with made-up weights, built in memory: it costs what the real
// model costs to run (the reference forward pass dequantizes everything to f32 anyway), so a
// benchmark can run where the checkpoint has not been downloaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nucleus/io/memory_source.hpp>
#include <nucleus/model/config.hpp>
#include <nucleus/model/tensor_names.hpp>

namespace nucleus::bench {

// SmolLM2-135M(-Instruct)'s hyperparameters, as its GGUF metadata gives them.
inline model::llama_config smollm2_135m_config() {
  model::llama_config c;
  c.arch = model::architecture::llama;
  c.vocab = 49152;
  c.hidden = 576;
  c.intermediate = 1536;
  c.n_layers = 30;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  c.rope_theta = 100000.0;
  c.rms_eps = 1e-5f;
  c.max_seq = 8192;
  c.tied_embeddings = true;
  c.rope = model::rope_style::adjacent_pairs;
  return c;
}

namespace detail {

// splitmix64: a fixed, portable stream (std::normal_distribution differs between standard libraries).
class weight_stream {
 public:
  explicit weight_stream(std::uint64_t seed) : state_(seed) {}

  // Irwin-Hall of four 16-bit uniforms, rescaled to N(0, 1)-ish: one 64-bit draw per weight.
  float normal() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const std::uint64_t sum = (z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48);
    constexpr float mean = 4 * 32767.5f;
    constexpr float stddev = 37837.227f;  // sqrt(4 * (65536^2 - 1) / 12)
    return (static_cast<float>(sum) - mean) * (1.0f / stddev);
  }

 private:
  std::uint64_t state_;
};

}  // namespace detail

// A GGUF-layout memory_source for `c`: f32 matrices and biases ~ N(0, stddev) (Hugging Face
// initializes fresh Llama weights with stddev 0.02), RMSNorm gains 1. The same config and seed give
// the same weights on every platform. Takes about 4 bytes per parameter (537 MB for SmolLM2-135M);
// llama::load copies the weights, so the source can go once the model is loaded.
inline io::memory_source make_synthetic_source(const model::llama_config& c, std::uint64_t seed = 1,
                                               float stddev = 0.02f, std::string name = "<synthetic>") {
  c.validate(name);
  using names = model::gguf_names;
  io::memory_source src(std::move(name));
  detail::weight_stream rng(seed);
  auto add = [&](std::string tensor, std::vector<std::int64_t> shape, bool gain) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
    if (!gain) {
      for (float& x : v) x = stddev * rng.normal();
    }
    src.add_owned_tensor(std::move(tensor), std::move(shape), std::move(v));
  };
  const std::int64_t H = c.hidden, qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate;

  add(std::string(names::embedding), {c.vocab, H}, false);
  if (!c.tied_embeddings) add(std::string(names::output), {c.vocab, H}, false);
  add(std::string(names::output_norm), {H}, true);
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    auto layer = [&](std::string_view leaf) { return names::layer(i, leaf); };
    add(layer(names::attn_norm), {H}, true);
    add(layer(names::q), {qd, H}, false);
    add(layer(names::k), {kvd, H}, false);
    add(layer(names::v), {kvd, H}, false);
    if (c.qkv_bias) {
      add(layer(names::q_bias), {qd}, false);
      add(layer(names::k_bias), {kvd}, false);
      add(layer(names::v_bias), {kvd}, false);
    }
    if (c.qk_norm) {
      add(layer(names::q_norm), {c.head_dim}, true);
      add(layer(names::k_norm), {c.head_dim}, true);
    }
    add(layer(names::o), {H, qd}, false);
    add(layer(names::ffn_norm), {H}, true);
    add(layer(names::gate), {I, H}, false);
    add(layer(names::up), {I, H}, false);
    add(layer(names::down), {H, I}, false);
  }

  // The keys read_config reads; the GGUF layout itself (adjacent-pair RoPE for llama, qk norm for
  // qwen3, tied head without output.weight) follows from the architecture and the tensors present.
  const std::string p = std::string(model::name(c.arch)) + ".";
  auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  src.set_metadata("general.architecture", std::string(model::name(c.arch)));
  src.set_metadata(p + "vocab_size", u32(c.vocab));
  src.set_metadata(p + "embedding_length", u32(H));
  src.set_metadata(p + "feed_forward_length", u32(I));
  src.set_metadata(p + "block_count", u32(c.n_layers));
  src.set_metadata(p + "attention.head_count", u32(c.n_heads));
  src.set_metadata(p + "attention.head_count_kv", u32(c.n_kv_heads));
  src.set_metadata(p + "attention.key_length", u32(c.head_dim));
  src.set_metadata(p + "context_length", u32(c.max_seq));
  src.set_metadata(p + "rope.freq_base", static_cast<float>(c.rope_theta));
  src.set_metadata(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
  return src;
}

}  // namespace nucleus::bench
