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
  if (g.below(8) == 0) {  // a knob only the gather path serves
    if (hf_like)
      p.typical_p = 0.8f;
    else if (llama_like)
      p.top_n_sigma = 1.0f;
  }
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
    if (g.below(2)) {
      c.mask.assign((V + 31) / 32, 0u);
      for (auto& w : c.mask) w = static_cast<std::uint32_t>(g.next() | g.next());
    }
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
