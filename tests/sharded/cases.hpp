// Random sharded-sampling cases shared by tests/sharded (threads, in-process shards) and tests/mpi
// (ranks): a row, an engine order with knobs and processors, a request and a random cut.
#pragma once

#include <algorithm>
#include <cmath>
#include <nucleus/engine.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reference/cases.hpp"
#include "reference/reference.hpp"

namespace nucleus_sharded_cases {

namespace nc = nucleus;
namespace ref = nucleus_ref;

struct sharded_case {
  nc::sampling_params params;
  nc::engine_order order = nc::engine_order::nucleus;
  std::vector<float> row;
  std::vector<std::int32_t> prompt, output;
  std::vector<std::uint32_t> mask;
  std::uint64_t position = 0, stream = 0;
  std::vector<std::size_t> cuts;
  std::string describe() const {
    std::ostringstream o;
    o << "order " << static_cast<int>(order) << " V " << row.size() << " T " << params.temperature << " k "
      << params.top_k << " p " << params.top_p << " min_p " << params.min_p << " logprobs " << params.logprobs
      << " mode " << static_cast<int>(params.logprobs_mode) << " shards " << cuts.size() - 1 << " cuts";
    for (std::size_t c : cuts) o << ' ' << c;
    return o.str();
  }
};

// Random knobs of every order, with the fast paths (temperature, top-k, top-p, min-p) most often and
// the rest (gathered) sometimes; processors on a third of the cases.
inline sharded_case make_case(std::size_t index) {
  ref::rng g(0x5348415244ull ^ (index * 0x9E3779B97F4A7C15ull));
  sharded_case c;
  const std::size_t V = index % 250 == 7 ? 248320 : nucleus_cases::random_vocab(g, index);
  c.row = ref::make_row(nucleus_cases::random_kind(g), V, g);
  if (g.below(5) == 0)  // coarse values: many exact ties
    for (float& x : c.row)
      if (std::isfinite(x)) x = std::round(x);
  c.order = static_cast<nc::engine_order>(g.below(4));
  nc::sampling_params& p = c.params;
  const std::uint64_t t = g.below(8);
  p.temperature = t == 0 ? 0.0f : t == 1 ? 1.0f : static_cast<float>(g.uniform(0.2, 2.0));
  if (g.below(2)) p.top_k = g.below(4) == 0 ? static_cast<int>(V + 3) : static_cast<int>(1 + g.below(60));
  if (g.below(2)) p.top_p = g.below(3) == 0 ? 0.999f : static_cast<float>(g.uniform(0.05, 0.99));
  if (g.below(3) == 0) p.min_p = g.below(2) ? 0.05f : static_cast<float>(g.uniform(0.0, 0.5));
  p.seed = g.next();
  p.logprobs = static_cast<int>(g.below(7)) - 1;
  p.logprobs_mode = g.below(2) ? nc::logprob_mode::raw : nc::logprob_mode::processed;
  const bool llama_like = c.order == nc::engine_order::nucleus || c.order == nc::engine_order::llama_cpp;
  const bool hf_like = c.order == nc::engine_order::nucleus || c.order == nc::engine_order::hf;
  if (g.below(4) == 0) {  // a knob only the gather path serves
    switch (g.below(6)) {
      case 0:
        if (hf_like) p.typical_p = 0.8f;
        break;
      case 1:
        if (llama_like) p.top_n_sigma = 1.0f;
        break;
      case 2:
        if (llama_like) p.xtc_probability = 0.7f;
        break;
      case 3:
        if (hf_like) p.epsilon_cutoff = 3e-4f;
        break;
      case 4:
        if (llama_like) p.dynatemp_range = 0.4f;
        break;
      default:
        if (c.order != nc::engine_order::vllm) p.min_keep = 3;
    }
  }
  if (g.below(40) == 0) p.temperature = 1e-39f;  // 1/T overflows float: greedy
  if (g.below(3) == 0) {
    const std::size_t tokens = 1 + g.below(30);
    for (std::size_t i = 0; i < tokens; ++i) c.output.push_back(static_cast<std::int32_t>(g.below(V)));
    for (std::size_t i = 0; i < 8; ++i) c.prompt.push_back(static_cast<std::int32_t>(g.below(V)));
    p.repetition_penalty = 1.3f;
    if (c.order != nc::engine_order::hf) p.frequency_penalty = 0.5f;
    p.logit_bias = {{static_cast<std::int32_t>(g.below(V)), 4.0f},
                    {static_cast<std::int32_t>(g.below(V)), -2.0f}};
    if (g.below(2)) p.banned_token_ids = {static_cast<std::int32_t>(g.below(V))};
    if (llama_like && g.below(2)) p.dry_multiplier = 0.8f;
    if (hf_like && g.below(3) == 0) p.no_repeat_ngram_size = 2;
    if (g.below(3) == 0) {  // EOS banned until min_tokens
      p.min_tokens = 1000;
      p.eos_token_ids = {static_cast<std::int32_t>(g.below(V))};
    }
    if (g.below(5) == 0)
      for (int i = 0; i < 40; ++i) p.allowed_token_ids.push_back(static_cast<std::int32_t>(g.below(V)));
    if (g.below(2)) {
      c.mask.assign((V + 31) / 32, 0u);
      for (auto& w : c.mask) w = static_cast<std::uint32_t>(g.next() | g.next());
    }
  }
  // Mirostat (its mu is request state: tests give each side its own copy): it replaces the
  // truncation knobs, and llama.cpp applies no penalty with it.
  if (llama_like && g.below(12) == 0) {
    p.mirostat = 1 + static_cast<int>(g.below(2));
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.min_keep = 1;
    p.typical_p = 1.0f;
    p.top_n_sigma = -1.0f;
    p.xtc_probability = 0.0f;
    p.dynatemp_range = 0.0f;
    p.repetition_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.dry_multiplier = 0.0f;
  }
  c.position = g.below(1000);
  c.stream = g.below(3);
  // 1..8 shards at random boundaries (empty shards too); a few at the nominal even split.
  const std::size_t shards = 1 + g.below(8);
  c.cuts = {0};
  std::vector<std::size_t> inner;
  for (std::size_t i = 1; i < shards; ++i) inner.push_back(g.below(2) ? g.below(V + 1) : V * i / shards);
  std::sort(inner.begin(), inner.end());
  c.cuts.insert(c.cuts.end(), inner.begin(), inner.end());
  c.cuts.push_back(V);
  return c;
}

inline nc::row_request request_of(const sharded_case& c) {
  nc::row_request rq;
  rq.prompt = c.prompt;
  rq.output = c.output;
  rq.bitmask = c.mask;
  rq.position = c.position;
  rq.stream = c.stream;
  return rq;
}

}  // namespace nucleus_sharded_cases
