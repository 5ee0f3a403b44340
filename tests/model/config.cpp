#include <nucleus/model/config.hpp>

#include <catch2/catch.hpp>

#include <string>

#include "random_model.hpp"

using nucleus::io::format_error;
using nucleus::model::architecture;
using nucleus::model::llama_config;
using nucleus::model::read_config;
using nucleus::model::rope_style;
using nucleus::test::make_gguf_model;
using nucleus::test::make_hf_model;
using nucleus::test::tiny_spec;

namespace {

// The message of the format_error `f` throws; fails the test when it throws nothing or something else.
template <class F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const format_error& e) {
    return e.what();
  }
  FAIL("no format_error thrown");
  return {};
}

}  // namespace

TEST_CASE("config: read from config.json keys", "[model][config]") {
  tiny_spec s;
  s.arch = "qwen2";
  s.tied = false;
  s.qkv_bias = true;
  s.rope_theta = 1e6;
  const llama_config c = read_config(make_hf_model(s, 1));
  CHECK(c.arch == architecture::qwen2);
  CHECK(c.vocab == s.vocab);
  CHECK(c.hidden == s.hidden);
  CHECK(c.intermediate == s.intermediate);
  CHECK(c.n_layers == s.n_layers);
  CHECK(c.n_heads == s.n_heads);
  CHECK(c.n_kv_heads == s.n_kv_heads);
  CHECK(c.head_dim == s.head_dim);
  CHECK(c.max_seq == s.max_seq);
  CHECK(c.rope_theta == 1e6);
  CHECK(c.rms_eps == static_cast<float>(s.rms_eps));
  CHECK_FALSE(c.tied_embeddings);
  CHECK(c.qkv_bias);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.rope == rope_style::rotate_half);
}

TEST_CASE("config: read from GGUF metadata; RoPE style follows the architecture", "[model][config]") {
  tiny_spec s;
  const llama_config llama = read_config(make_gguf_model(s, 1));
  CHECK(llama.arch == architecture::llama);
  CHECK(llama.tied_embeddings);
  CHECK(llama.head_dim == s.hidden / s.n_heads);
  CHECK(llama.rope == rope_style::adjacent_pairs);

  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 16;  // != hidden / n_heads: read from attention.key_length
  const llama_config qwen3 = read_config(make_gguf_model(s, 1));
  CHECK(qwen3.arch == architecture::qwen3);
  CHECK(qwen3.head_dim == 16);
  CHECK(qwen3.qk_norm);
  CHECK(qwen3.rope == rope_style::rotate_half);
}

TEST_CASE("config: a missing or mistyped key names the file and the key", "[model][config]") {
  tiny_spec s;
  {
    auto src = make_gguf_model(s, 1, "weights.gguf");
    src.set_metadata("llama.block_count", std::string("two"));
    const std::string what = format_error_of([&] { (void)read_config(src); });
    CHECK_THAT(what, Catch::Contains("weights.gguf") && Catch::Contains("llama.block_count"));
  }
  {
    nucleus::test::test_source src("config.json");
    src.set_metadata("model_type", std::string("llama"));
    const std::string what = format_error_of([&] { (void)read_config(src); });
    CHECK_THAT(what, Catch::Contains("config.json") && Catch::Contains("vocab_size"));
  }
  {
    auto src = make_hf_model(s, 1, "m");
    src.set_metadata("model_type", std::string("gpt2"));
    CHECK_THAT(format_error_of([&] { (void)read_config(src); }), Catch::Contains("gpt2"));
  }
  {
    nucleus::test::test_source src("empty");
    CHECK_THAT(format_error_of([&] { (void)read_config(src); }), Catch::Contains("model_type"));
  }
}

TEST_CASE("config: absurd dimensions are refused before anything is allocated", "[model][config]") {
  tiny_spec s;
  auto with = [&](const std::string& key, nucleus::io::metadata_value v) {
    auto src = make_hf_model(s, 1, "big");
    src.set_metadata(key, std::move(v));
    return format_error_of([&] { (void)read_config(src); });
  };
  CHECK_THAT(with("hidden_size", std::int64_t{1} << 40), Catch::Contains("hidden"));
  CHECK_THAT(with("num_hidden_layers", std::int64_t{0}), Catch::Contains("n_layers"));
  CHECK_THAT(with("vocab_size", std::int64_t{-5}), Catch::Contains("vocab"));
  CHECK_THAT(with("num_key_value_heads", std::int64_t{3}), Catch::Contains("n_kv_heads"));
  CHECK_THAT(with("head_dim", std::int64_t{7}), Catch::Contains("head_dim"));
  CHECK_THAT(with("rms_norm_eps", -1.0), Catch::Contains("rms_eps"));
  CHECK_THAT(with("max_position_embeddings", std::int64_t{1} << 40), Catch::Contains("max_seq"));
  CHECK_THAT(with("rope_scaling.type", std::string("yarn")), Catch::Contains("rope_scaling"));

  // Every dimension within its own cap, the product far beyond the parameter cap.
  auto src = make_hf_model(s, 1, "bomb");
  src.set_metadata("vocab_size", std::int64_t{1} << 21);
  src.set_metadata("hidden_size", std::int64_t{1} << 20);
  src.set_metadata("intermediate_size", std::int64_t{1} << 20);
  src.set_metadata("num_hidden_layers", std::int64_t{1000});
  src.set_metadata("num_attention_heads", std::int64_t{1024});
  src.set_metadata("num_key_value_heads", std::int64_t{1024});
  src.set_metadata("head_dim", std::int64_t{1024});
  CHECK_THAT(format_error_of([&] { (void)read_config(src); }), Catch::Contains("parameter count"));

  // Unvalidated configs: the size arithmetic itself reports overflow rather than wrapping.
  llama_config c;
  c.vocab = c.hidden = c.intermediate = std::int64_t{1} << 40;
  c.n_layers = c.n_heads = c.n_kv_heads = c.head_dim = 1 << 20;
  CHECK_THAT(format_error_of([&] { (void)c.parameter_count("x"); }), Catch::Contains("overflow"));
}

TEST_CASE("config: parameter_count matches the tensors of a tiny model", "[model][config]") {
  for (bool tied : {true, false}) {
    tiny_spec s;
    s.tied = tied;
    s.qkv_bias = s.qk_norm = true;  // counted whether or not present: an upper bound is what the cap needs
    const auto w = nucleus::test::make_weights(s, 3);
    std::int64_t n = 0;
    for (const auto& [k, v] : w.values) n += static_cast<std::int64_t>(v.size());
    CHECK(read_config(make_hf_model(s, 3)).parameter_count() == n);
  }
}
