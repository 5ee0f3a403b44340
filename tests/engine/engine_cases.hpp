// The bridge from the engine reference (tests/reference/engine_reference.hpp) to nucleus's engine API,
// random requests, and the one check every engine test uses: process() and sample() against the reference.
#pragma once

#include <nucleus/engine.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "reference/cases.hpp"
#include "reference/engine_reference.hpp"

namespace engine_cases {

namespace nc = nucleus;
namespace ref = nucleus_ref;

inline nc::engine_order to_nc(ref::engine_order o) {
  switch (o) {
    case ref::engine_order::nucleus:
      return nc::engine_order::nucleus;
    case ref::engine_order::vllm:
      return nc::engine_order::vllm;
    case ref::engine_order::hf:
      return nc::engine_order::hf;
    case ref::engine_order::llama_cpp:
      return nc::engine_order::llama_cpp;
  }
  return nc::engine_order::nucleus;
}

inline nc::sampling_params to_nc(const ref::engine_params& p) {
  nc::sampling_params s;
  s.temperature = p.temperature;
  s.top_k = static_cast<decltype(s.top_k)>(p.top_k);
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repetition_penalty = p.repetition_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.penalty_last_n = static_cast<decltype(s.penalty_last_n)>(p.penalty_last_n);
  s.logit_bias.clear();
  for (auto& b : p.logit_bias) s.logit_bias.push_back(nc::token_bias{b.token, b.bias});
  s.allowed_token_ids.assign(p.allowed_token_ids.begin(), p.allowed_token_ids.end());
  s.banned_token_ids.assign(p.banned_token_ids.begin(), p.banned_token_ids.end());
  s.eos_token_ids.assign(p.eos_token_ids.begin(), p.eos_token_ids.end());
  s.min_tokens = static_cast<decltype(s.min_tokens)>(p.min_tokens);
  s.seed = p.seed;
  s.logprobs = static_cast<decltype(s.logprobs)>(p.logprobs);
  s.logprobs_mode = p.mode == ref::logprob_mode::raw ? nc::logprob_mode::raw : nc::logprob_mode::processed;
  return s;
}

inline nc::row_request view(const ref::engine_request& rq) {
  return nc::row_request{std::span<const std::int32_t>(rq.prompt), std::span<const std::int32_t>(rq.output),
                         std::span<const std::uint32_t>(rq.bitmask), rq.position};
}

inline ref::engine_status to_ref(nc::status s) {
  switch (s) {
    case nc::status::ok:
      return ref::engine_status::ok;
    case nc::status::no_candidates:
      return ref::engine_status::no_candidates;
    case nc::status::empty_row:
      return ref::engine_status::empty_row;
    case nc::status::invalid_input:
      return ref::engine_status::invalid_input;
  }
  return ref::engine_status::ok;
}

inline ref::observed observe(const nc::distribution& d) {
  ref::observed o;
  o.ids.assign(d.ids().begin(), d.ids().end());
  o.probs.assign(d.probs().begin(), d.probs().end());
  o.sorted = d.sorted();
  return o;
}

inline ref::observed_result observe(const nc::row_result& r, std::span<const nc::token_logprob> top) {
  ref::observed_result o;
  o.st = to_ref(r.status);
  o.token = r.token;
  o.logprob = r.logprob;
  o.rank = static_cast<long long>(r.rank);
  o.top_count = static_cast<std::size_t>(r.top_count);
  for (std::size_t i = 0; i < o.top_count && i < top.size(); ++i)
    o.top.push_back({top[i].token, top[i].logprob});
  return o;
}

// What the library returned for one row: process() (with its status) and sample().
struct lib_run {
  ref::engine_status dist_status = ref::engine_status::ok;
  ref::observed dist;
  ref::observed_result result;
};

template <class T>
lib_run run_library(nc::sampler& s, std::span<const T> row, nc::workspace& ws,
                    const ref::engine_request& rq) {
  lib_run out;
  nc::distribution d = s.process(row, ws, view(rq));
  out.dist_status = to_ref(d.status());
  out.dist = observe(d);
  std::vector<nc::token_logprob> top(64);
  nc::row_result r = s.sample(row, ws, view(rq), std::span<nc::token_logprob>(top));
  out.result = observe(r, top);
  return out;
}

// process() and sample() of the library for (row, params, order, request) against the reference;
// empty when they agree.
inline std::string check(std::span<const float> row, const ref::engine_params& p, ref::engine_order o,
                         const ref::engine_request& rq, nc::workspace& ws, lib_run* out = nullptr) {
  std::string ctx = ref::engine_context(row, p, o, rq);
  try {
    nc::sampler s(to_nc(p), to_nc(o));
    lib_run lib = run_library(s, row, ws, rq);
    std::string e = ref::check_engine_distribution(row, p, o, rq, lib.dist_status, lib.dist);
    if (e.empty()) e = ref::check_engine_result(row, p, o, rq, lib.dist, lib.result);
    if (out) *out = std::move(lib);
    return e;
  } catch (const std::exception& ex) {
    return ctx + ": threw " + ex.what();
  }
}

// The library's survivor set (ascending ids) for a request.
inline std::vector<std::int32_t> survivors(std::span<const float> row, const ref::engine_params& p,
                                           ref::engine_order o, const ref::engine_request& rq = {}) {
  nc::workspace ws;
  nc::sampler s(to_nc(p), to_nc(o));
  nc::distribution d = s.process(row, ws, view(rq));
  std::vector<std::int32_t> ids(d.ids().begin(), d.ids().end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The reference's nominal survivor set (ascending ids).
inline std::vector<std::int32_t> ref_survivors(std::span<const float> row, const ref::engine_params& p,
                                               ref::engine_order o, const ref::engine_request& rq = {}) {
  std::vector<std::int32_t> ids;
  for (auto& e : ref::engine_process(row, p, o, rq).dist.entries) ids.push_back(e.id);
  return ids;
}

// "[tag] e", or "" when e is empty.
inline std::string tagged(const char* tag, const std::string& e) {
  if (e.empty()) return e;
  std::string out = "[";
  out.append(tag).append("] ").append(e);
  return out;
}

using nucleus_cases::error_log;  // the core tests' failure collector

// ---------------------------------------------------------------------------------------------
// Random requests.

inline std::vector<std::int32_t> random_ids(std::size_t V, std::size_t n, ref::rng& g) {
  std::vector<std::int32_t> ids(n);
  // Draw from a small pool half the time so histories repeat tokens.
  std::size_t pool = g.below(2) ? std::min<std::size_t>(V, 1 + g.below(8)) : V;
  std::vector<std::int32_t> from(pool);
  for (auto& t : from) t = static_cast<std::int32_t>(g.below(V));
  for (auto& t : ids) t = from[g.below(pool)];
  return ids;
}

inline float f(double x) {
  return static_cast<float>(x);
}

inline ref::engine_params random_params(std::size_t V, ref::engine_order o, ref::rng& g) {
  ref::engine_params p;
  switch (g.below(8)) {
    case 0:
      p.temperature = 0.0f;
      break;
    case 1:
      p.temperature = 1.0f;
      break;
    case 2:
      p.temperature = 5e-6f;  // greedy for vllm only
      break;
    default:
      p.temperature = f(g.uniform(0.1, 2.5));
  }
  switch (g.below(6)) {
    case 0:
      p.top_k = 0;
      break;
    case 1:
      p.top_k = -1;
      break;
    case 2:
      p.top_k = 1;
      break;
    case 3:
      p.top_k = 40;
      break;
    default:
      p.top_k = static_cast<long long>(1 + g.below(V));
  }
  switch (g.below(4)) {
    case 0:
      p.top_p = 1.0f;
      break;
    case 1:
      p.top_p = 0.9f;
      break;
    default:
      p.top_p = f(g.uniform(0.05, 1.0));
  }
  switch (g.below(4)) {
    case 0:
      p.min_p = 0.0f;
      break;
    case 1:
      p.min_p = 0.05f;
      break;
    default:
      p.min_p = f(g.uniform(0.0, 0.5));
  }
  if (g.below(2)) p.repetition_penalty = f(g.uniform(0.5, 2.0));
  if (o != ref::engine_order::hf) {
    if (g.below(2)) p.presence_penalty = f(g.uniform(-1.0, 2.0));
    if (g.below(2)) p.frequency_penalty = f(g.uniform(-1.0, 2.0));
  }
  switch (g.below(4)) {
    case 0:
      p.penalty_last_n = 0;
      break;
    case 1:
      p.penalty_last_n = -1;
      break;
    case 2:
      p.penalty_last_n = 64;
      break;
    default:
      p.penalty_last_n = static_cast<long long>(1 + g.below(20));
  }
  for (std::size_t i = 0, n = g.below(6); i < n; ++i)
    p.logit_bias.push_back(
        {static_cast<std::int32_t>(g.below(V)), f(g.below(8) == 0 ? -100.0 : g.uniform(-5, 5))});
  if (g.below(5) == 0) p.allowed_token_ids = random_ids(V, 1 + g.below(std::min<std::size_t>(V, 50)), g);
  if (g.below(2)) p.banned_token_ids = random_ids(V, g.below(4), g);
  if (g.below(2)) {
    p.eos_token_ids = random_ids(V, 1 + g.below(2), g);
    p.min_tokens = static_cast<long long>(g.below(6));
  }
  p.seed = g.next();
  static constexpr int counts[] = {-1, 0, 1, 5, 64};
  p.logprobs = counts[g.below(5)];
  p.mode = g.below(2) ? ref::logprob_mode::raw : ref::logprob_mode::processed;
  return p;
}

inline ref::engine_request random_request(std::size_t V, ref::rng& g) {
  ref::engine_request rq;
  rq.prompt = random_ids(V, g.below(40), g);
  rq.output = random_ids(V, g.below(12), g);
  if (g.below(3) == 0) {
    std::size_t words = ref::bitmask_words(V) + g.below(2);
    rq.bitmask.resize(words);
    const double density = g.uniform(0.05, 1.0);
    for (auto& w : rq.bitmask)
      for (int b = 0; b < 32; ++b)
        if (g.uniform() < density) w |= 1u << b;
  }
  rq.position = g.below(1u << 20);
  return rq;
}

}  // namespace engine_cases
