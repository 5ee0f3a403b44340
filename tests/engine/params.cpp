// sampling_params validation: the sampler throws std::invalid_argument naming the bad field when built.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "engine/engine_cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using Catch::Matchers::Contains;

namespace {

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

constexpr nc::engine_order orders[] = {nc::engine_order::nucleus, nc::engine_order::vllm,
                                       nc::engine_order::hf, nc::engine_order::llama_cpp};

nc::sampler build(const nc::sampling_params& p, nc::engine_order o) {
  return nc::sampler(p, o);
}

struct bad_case {
  const char* field;
  std::function<void(nc::sampling_params&)> set;
};

}  // namespace

TEST_CASE("engine params: the defaults build in every order", "[engine][params]") {
  nc::sampling_params p;
  CHECK(p.penalty_last_n == 64);
  CHECK(p.logprobs_mode == nc::logprob_mode::raw);
  CHECK(p.logprobs == -1);  // vLLM's default: nothing asked
  for (auto o : orders) CHECK_NOTHROW(build(p, o));
  CHECK_NOTHROW(nc::presets::nucleus(p));
  CHECK_NOTHROW(nc::presets::vllm(p));
  CHECK_NOTHROW(nc::presets::hf(p));
  CHECK_NOTHROW(nc::presets::llama_cpp(p));
}

TEST_CASE("engine params: each bad field throws, naming it", "[engine][params]") {
  std::vector<bad_case> cases = {
      {"temperature", [](auto& p) { p.temperature = nan_f; }},
      {"temperature", [](auto& p) { p.temperature = inf_f; }},
      {"top_p", [](auto& p) { p.top_p = 0.0f; }},
      {"top_p", [](auto& p) { p.top_p = -0.5f; }},
      {"top_p", [](auto& p) { p.top_p = 1.5f; }},
      {"top_p", [](auto& p) { p.top_p = nan_f; }},
      {"min_p", [](auto& p) { p.min_p = -0.1f; }},
      {"min_p", [](auto& p) { p.min_p = 1.5f; }},
      {"min_p", [](auto& p) { p.min_p = nan_f; }},
      {"repetition_penalty", [](auto& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](auto& p) { p.repetition_penalty = -1.0f; }},
      {"repetition_penalty", [](auto& p) { p.repetition_penalty = nan_f; }},
      {"repetition_penalty", [](auto& p) { p.repetition_penalty = inf_f; }},
      {"presence_penalty", [](auto& p) { p.presence_penalty = nan_f; }},
      {"presence_penalty", [](auto& p) { p.presence_penalty = inf_f; }},
      {"frequency_penalty", [](auto& p) { p.frequency_penalty = nan_f; }},
      {"frequency_penalty", [](auto& p) { p.frequency_penalty = -inf_f; }},
      {"logit_bias",
       [](auto& p) {
         p.logit_bias = {nc::token_bias{0, nan_f}};
       }},
      {"logprobs", [](auto& p) { p.logprobs = 65; }},
      {"logprobs", [](auto& p) { p.logprobs = 1000; }},
      {"min_keep", [](auto& p) { p.min_keep = 0; }},  // llama.cpp's "no floor" 0 is nucleus's 1
      {"min_keep", [](auto& p) { p.min_keep = -3; }},
  };
  nc::sampling_params probe;
  if constexpr (std::is_signed_v<decltype(probe.logprobs)>)
    cases.push_back({"logprobs", [](auto& p) { p.logprobs = -2; }});
  if constexpr (std::is_signed_v<decltype(probe.min_tokens)>)
    cases.push_back({"min_tokens", [](auto& p) { p.min_tokens = -1; }});
  for (auto o : orders) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const bad_case& c = cases[i];
      // hf rejects any nonzero presence / frequency; it must still throw, naming the field.
      INFO("order " << static_cast<int>(o) << ", case " << i << ", field " << c.field);
      nc::sampling_params p;
      c.set(p);
      CHECK_THROWS_AS(build(p, o), std::invalid_argument);
      CHECK_THROWS_WITH(build(p, o), Contains(c.field));
    }
  }
  // A negative temperature: rejected by every order but llama_cpp, where T <= 0 means greedy
  // (tests/engine/orders.cpp checks it is greedy there if accepted).
  for (auto o : {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::hf}) {
    nc::sampling_params p;
    p.temperature = -0.5f;
    CHECK_THROWS_AS(build(p, o), std::invalid_argument);
    CHECK_THROWS_WITH(build(p, o), Contains("temperature"));
  }
  // penalty_last_n below -1, where it is read.
  nc::sampling_params p;
  p.penalty_last_n = -2;
  CHECK_THROWS_AS(build(p, nc::engine_order::llama_cpp), std::invalid_argument);
  CHECK_THROWS_WITH(build(p, nc::engine_order::llama_cpp), Contains("penalty_last_n"));
  CHECK_THROWS_AS(nc::presets::llama_cpp(p), std::invalid_argument);
}

TEST_CASE("engine params: the edges of each range are accepted", "[engine][params]") {
  const std::vector<std::function<void(nc::sampling_params&)>> edges = {
      [](auto& p) { p.temperature = 0.0f; },
      [](auto& p) { p.temperature = 1e-7f; },
      [](auto& p) { p.temperature = 100.0f; },
      [](auto& p) { p.top_p = 1.0f; },
      [](auto& p) { p.top_p = 1e-6f; },
      [](auto& p) { p.min_p = 0.0f; },
      [](auto& p) { p.min_p = 1.0f; },
      [](auto& p) { p.top_k = -1; },
      [](auto& p) { p.top_k = 0; },
      [](auto& p) { p.top_k = 1 << 30; },
      [](auto& p) { p.repetition_penalty = 0.01f; },
      [](auto& p) { p.repetition_penalty = 10.0f; },
      [](auto& p) { p.logprobs = -1; },
      [](auto& p) { p.logprobs = 0; },
      [](auto& p) { p.logprobs = 64; },
      [](auto& p) { p.penalty_last_n = -1; },
      [](auto& p) { p.penalty_last_n = 0; },
      [](auto& p) { p.penalty_last_n = 100000; },
      [](auto& p) {
        p.logit_bias = {nc::token_bias{3, -100.0f}, nc::token_bias{3, 100.0f}};
      },
      [](auto& p) { p.logprobs_mode = nc::logprob_mode::processed; },
      [](auto& p) { p.min_keep = 1; },
  };
  for (auto o : orders) {
    for (std::size_t i = 0; i < edges.size(); ++i) {
      INFO("order " << static_cast<int>(o) << ", edge " << i);
      nc::sampling_params p;
      edges[i](p);
      CHECK_NOTHROW(build(p, o));
    }
  }
}

TEST_CASE("engine params: hf rejects presence and frequency; the others accept them", "[engine][params]") {
  for (float v : {0.5f, -0.5f, 2.0f}) {
    nc::sampling_params pres, freq;
    pres.presence_penalty = v;
    freq.frequency_penalty = v;
    CHECK_THROWS_AS(build(pres, nc::engine_order::hf), std::invalid_argument);
    CHECK_THROWS_WITH(build(pres, nc::engine_order::hf), Contains("presence_penalty"));
    CHECK_THROWS_AS(build(freq, nc::engine_order::hf), std::invalid_argument);
    CHECK_THROWS_WITH(build(freq, nc::engine_order::hf), Contains("frequency_penalty"));
    CHECK_THROWS_AS(nc::presets::hf(pres), std::invalid_argument);
    CHECK_THROWS_AS(nc::presets::hf(freq), std::invalid_argument);
    for (auto o : {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::llama_cpp}) {
      CHECK_NOTHROW(build(pres, o));
      CHECK_NOTHROW(build(freq, o));
    }
  }
  nc::sampling_params zero;
  zero.presence_penalty = 0.0f;
  zero.frequency_penalty = 0.0f;
  zero.repetition_penalty = 1.3f;
  CHECK_NOTHROW(build(zero, nc::engine_order::hf));
}

TEST_CASE("engine params: a negative token id is refused, at construction or per row", "[engine][params]") {
  // The spec makes ids outside [0, V) invalid_input per row; a negative id can be refused earlier.
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  const std::vector<std::function<void(nc::sampling_params&)>> negative = {
      [](auto& p) {
        p.allowed_token_ids = {0, -1};
      },
      [](auto& p) { p.banned_token_ids = {-2}; },
      [](auto& p) { p.eos_token_ids = {-1}; },
      [](auto& p) {
        p.logit_bias = {nc::token_bias{-1, 1.0f}};
      },
  };
  for (auto o : orders) {
    for (std::size_t i = 0; i < negative.size(); ++i) {
      INFO("order " << static_cast<int>(o) << ", case " << i);
      nc::sampling_params p;
      negative[i](p);
      bool refused = false;
      try {
        nc::sampler s(p, o);
        nc::workspace ws;
        std::vector<nc::token_logprob> top(64);
        nc::row_result r = s.sample(std::span<const float>(row), ws, nc::row_request{{}, {}, {}, 0},
                                    std::span<nc::token_logprob>(top));
        refused = r.status == nc::status::invalid_input && r.token == -1;
      } catch (const std::invalid_argument&) {
        refused = true;
      }
      CHECK(refused);
    }
  }
}

TEST_CASE("engine params: min_keep defaults to 1; vllm and mirostat refuse a floor",
          "[engine][params][min_keep]") {
  CHECK(nc::sampling_params{}.min_keep == 1);
  nc::sampling_params p;
  p.min_keep = 5;
  for (auto o : {nc::engine_order::nucleus, nc::engine_order::hf, nc::engine_order::llama_cpp})
    CHECK_NOTHROW(build(p, o));
  CHECK_NOTHROW(nc::presets::hf(p));
  CHECK_NOTHROW(nc::presets::llama_cpp(p));
  // vLLM has no min_keep: the preset names the field, as for its other missing stages.
  CHECK_THROWS_AS(nc::presets::vllm(p), std::invalid_argument);
  CHECK_THROWS_WITH(nc::presets::vllm(p), Contains("min_keep") && Contains("vLLM has none"));
  // Mirostat replaces the truncation stages, and with them their floor.
  p.mirostat = 2;
  for (auto o : {nc::engine_order::nucleus, nc::engine_order::llama_cpp})
    CHECK_THROWS_WITH(build(p, o), Contains("min_keep") && Contains("mirostat"));
  p.min_keep = 1;
  CHECK_NOTHROW(nc::presets::llama_cpp(p));
  // A floor beyond any vocabulary is accepted: it keeps every candidate, and needs no more room
  // than the row (so a batch reserves nothing for it).
  nc::sampling_params wide;
  wide.min_keep = std::numeric_limits<int>::max();
  CHECK(nc::sampler(wide).key_capacity() == nc::sampler(nc::sampling_params{}).key_capacity());
}
