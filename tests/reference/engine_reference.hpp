// An independent reference for the engine layer ("Engine layer: per-request sampling" in
// docs/semantics.md), written from that specification alone: the processors in their fixed order, the
// four engine orders' stage sequences, and the logprobs of a row_result. It reuses the stages of
// reference.hpp and stays as plain as they are.
//
// What is exact and what is not:
// - The processed row (masks, logit_bias, penalties) is computed in float with exactly the spec's
//   formulas (x / r, x * r, x += bias, x -= float(c) * frequency + presence, a finite result beyond
//   float's range clamped to ±FLT_MAX), so it equals the library's bit for bit. Every decision that reads
//   logits alone is therefore compared exactly: the mask and history effects, top-k (exact or keep-ties),
//   greedy argmax, ranks and the order of top-n lists.
// - Probabilities and log-probabilities come from the double-precision stages of reference.hpp and are
//   compared within prob_close / logprob_tol; razor-close top-p and min-p decisions (within
//   boundary_slack) follow the library's choice, as in reference.hpp's guided_reference.
// - A draw is checked against the draw rule on the library's own distribution order, with 1e-5 of
//   probability slack at a running-sum boundary (draw_positions).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "reference/reference.hpp"

namespace nucleus_ref {

enum class engine_order { nucleus, vllm, hf, llama_cpp };
inline constexpr engine_order all_engine_orders[] = {engine_order::nucleus, engine_order::vllm,
                                                     engine_order::hf, engine_order::llama_cpp};

inline const char* to_string(engine_order o) {
  switch (o) {
    case engine_order::nucleus:
      return "nucleus";
    case engine_order::vllm:
      return "vllm";
    case engine_order::hf:
      return "hf";
    case engine_order::llama_cpp:
      return "llama_cpp";
  }
  return "?";
}

enum class logprob_mode { raw, processed };

struct bias_entry {
  std::int32_t token;
  float bias;
};

// A request's parameters, stored as the floats and ints the library receives so both sides see one value.
struct engine_params {
  float temperature = 1.0f;
  long long top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  long long min_keep = 1;  // top-k (raised to it: nucleus, hf), top-p and min-p (not vllm) keep this many
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  long long penalty_last_n = 64;
  std::vector<bias_entry> logit_bias;
  std::vector<std::int32_t> allowed_token_ids, banned_token_ids, eos_token_ids;
  long long min_tokens = 0;
  std::uint64_t seed = 0;
  int logprobs = -1;  // vLLM's default: nothing asked
  logprob_mode mode = logprob_mode::raw;
};

// What an engine passes with each row; an empty bitmask means "no structured-output mask".
struct engine_request {
  std::vector<std::int32_t> prompt, output;
  std::vector<std::uint32_t> bitmask;
  std::uint64_t position = 0;
};

enum class engine_status { ok, no_candidates, empty_row, invalid_input };

inline const char* to_string(engine_status s) {
  switch (s) {
    case engine_status::ok:
      return "ok";
    case engine_status::no_candidates:
      return "no_candidates";
    case engine_status::empty_row:
      return "empty_row";
    case engine_status::invalid_input:
      return "invalid_input";
  }
  return "?";
}

inline engine_status to_engine(status s) {
  switch (s) {
    case status::ok:
      return engine_status::ok;
    case status::no_candidates:
      return engine_status::no_candidates;
    case status::empty_row:
      return engine_status::empty_row;
  }
  return engine_status::ok;
}

inline std::string describe(const engine_params& p, engine_order o) {
  std::ostringstream os;
  os.precision(9);
  os << to_string(o) << "{T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p << " m=" << p.min_p
     << " min_keep=" << p.min_keep << " rep=" << p.repetition_penalty << " pres=" << p.presence_penalty
     << " freq=" << p.frequency_penalty << " last_n=" << p.penalty_last_n << " bias=" << p.logit_bias.size()
     << " allowed=" << p.allowed_token_ids.size() << " banned=" << p.banned_token_ids.size()
     << " min_tokens=" << p.min_tokens << " eos=" << p.eos_token_ids.size() << " seed=" << p.seed
     << " logprobs=" << p.logprobs << (p.mode == logprob_mode::raw ? " raw" : " processed") << "}";
  return os.str();
}

inline std::string describe(const engine_request& rq) {
  std::ostringstream os;
  os << "request{prompt=" << rq.prompt.size() << " output=" << rq.output.size()
     << " bitmask_words=" << rq.bitmask.size() << " position=" << rq.position << "}";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Penalty histories (with multiplicity).

// llama.cpp: the last penalty_last_n tokens of prompt followed by output (0: none, -1: all).
inline std::vector<std::int32_t> llama_cpp_window(const engine_params& p, const engine_request& rq) {
  std::vector<std::int32_t> all(rq.prompt);
  all.insert(all.end(), rq.output.begin(), rq.output.end());
  if (p.penalty_last_n < 0) return all;
  std::size_t n = std::min(all.size(), static_cast<std::size_t>(p.penalty_last_n));
  return std::vector<std::int32_t>(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
}

// What the repetition penalty looks at: prompt ∪ output, or llama.cpp's window.
inline std::vector<std::int32_t> repetition_history(const engine_params& p, engine_order o,
                                                    const engine_request& rq) {
  if (o == engine_order::llama_cpp) return llama_cpp_window(p, rq);
  std::vector<std::int32_t> all(rq.prompt);
  all.insert(all.end(), rq.output.begin(), rq.output.end());
  return all;
}

// What presence / frequency count: output only (OpenAI, vLLM), llama.cpp's window, nothing for hf.
inline std::vector<std::int32_t> counted_history(const engine_params& p, engine_order o,
                                                 const engine_request& rq) {
  if (o == engine_order::llama_cpp) return llama_cpp_window(p, rq);
  if (o == engine_order::hf) return {};
  return rq.output;
}

// ---------------------------------------------------------------------------------------------
// Validity: bias, allowed and banned ids must lie in [0, V); eos ids too while min_tokens > 0; history
// ids only where an active penalty reads them; a bitmask must cover the row.

inline std::size_t bitmask_words(std::size_t V) {
  return (V + 31) / 32;
}

inline bool request_valid(std::size_t V, const engine_params& p, engine_order o, const engine_request& rq) {
  auto ok = [V](std::int32_t t) { return t >= 0 && static_cast<std::size_t>(t) < V; };
  auto all_ok = [&](const std::vector<std::int32_t>& ids) { return std::all_of(ids.begin(), ids.end(), ok); };
  if (!all_ok(p.allowed_token_ids) || !all_ok(p.banned_token_ids)) return false;
  if (p.min_tokens > 0 && !all_ok(p.eos_token_ids)) return false;
  for (auto& b : p.logit_bias)
    if (!ok(b.token)) return false;
  if (p.repetition_penalty != 1.0f && !all_ok(repetition_history(p, o, rq))) return false;
  if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && !all_ok(counted_history(p, o, rq)))
    return false;
  return rq.bitmask.empty() || rq.bitmask.size() >= bitmask_words(V);
}

// ---------------------------------------------------------------------------------------------
// The processors, in float, in the spec's fixed order. The request must be valid.

// Bias and penalties never make a finite logit infinite: beyond float's range is ±FLT_MAX.
inline float clamp_finite(float y) {
  constexpr float big = std::numeric_limits<float>::max();
  return y == inf ? big : y == -inf ? -big : y;
}

inline std::vector<float> apply_processors(std::span<const float> row, const engine_params& p, engine_order o,
                                           const engine_request& rq) {
  const std::size_t V = row.size();
  std::vector<float> x(row.begin(), row.end());
  auto ban = [&](std::size_t i) {
    if (!std::isnan(x[i])) x[i] = -inf;  // NaN stays NaN; it is no candidate either way
  };
  // 1. Masks: bitmask (bit i % 32 of word i / 32, set = allowed), allowed, banned, min_tokens/eos.
  if (!rq.bitmask.empty())
    for (std::size_t i = 0; i < V; ++i)
      if (((rq.bitmask[i / 32] >> (i % 32)) & 1u) == 0) ban(i);
  if (!p.allowed_token_ids.empty()) {
    std::vector<char> allowed(V, 0);
    for (auto t : p.allowed_token_ids) allowed[static_cast<std::size_t>(t)] = 1;
    for (std::size_t i = 0; i < V; ++i)
      if (!allowed[i]) ban(i);
  }
  for (auto t : p.banned_token_ids) ban(static_cast<std::size_t>(t));
  if (static_cast<long long>(rq.output.size()) < p.min_tokens)
    for (auto t : p.eos_token_ids) ban(static_cast<std::size_t>(t));
  // 2. logit_bias, one entry at a time (a repeated token adds again). ±inf and NaN stay as they are.
  for (auto& b : p.logit_bias) {
    float& v = x[static_cast<std::size_t>(b.token)];
    if (std::isfinite(v)) v = clamp_finite(v + b.bias);
  }
  // 3. Repetition penalty, once per distinct history token.
  if (p.repetition_penalty != 1.0f) {
    std::vector<char> seen(V, 0);
    const float r = p.repetition_penalty;
    for (auto t : repetition_history(p, o, rq)) {
      auto i = static_cast<std::size_t>(t);
      if (seen[i]) continue;
      seen[i] = 1;
      if (!std::isfinite(x[i])) continue;
      x[i] = clamp_finite(x[i] > 0.0f ? x[i] / r : x[i] * r);
    }
  }
  // 4. Presence and frequency: x -= float(c) * frequency + presence for each counted token.
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::vector<long long> count(V, 0);
    std::vector<std::int32_t> distinct;
    for (auto t : counted_history(p, o, rq))
      if (count[static_cast<std::size_t>(t)]++ == 0) distinct.push_back(t);
    for (auto t : distinct) {
      auto i = static_cast<std::size_t>(t);
      if (!std::isfinite(x[i])) continue;
      const float c = static_cast<float>(count[i]);
      const float penalty = c * p.frequency_penalty + p.presence_penalty;
      x[i] = clamp_finite(x[i] - penalty);
    }
  }
  return x;
}

// ---------------------------------------------------------------------------------------------
// The engine orders' stage sequences.

inline std::vector<stage> engine_stages(const engine_params& p, engine_order o) {
  // A temperature whose 1/T overflows float is the T -> 0 limit: greedy.
  const bool tiny = p.temperature > 0.0f && std::isinf(1.0f / p.temperature);
  const double T = tiny ? 0.0 : p.temperature, tp = p.top_p, m = p.min_p;
  const long long k = p.top_k;
  // min_keep: HF raises top-k's k to it (so does nucleus); llama.cpp's top-k takes none; vLLM has none.
  const auto keep = static_cast<std::size_t>(std::max(1LL, p.min_keep));
  const long long k_raised = k > 0 ? std::max(k, p.min_keep) : k;
  switch (o) {
    case engine_order::nucleus:
      return {temperature(T), top_k(k_raised), top_p(tp, keep), min_p(m, keep)};
    case engine_order::vllm:
      if (T < 1e-5) return {temperature(0.0)};  // vLLM samples greedily below 1e-5
      return {temperature(T), min_p(m), top_k_ties(k), top_p(tp)};
    case engine_order::hf:
      return {temperature(T), top_k_ties(k_raised), top_p(tp, keep), min_p(m, keep)};
    case engine_order::llama_cpp:
      // Temperature last: top-k, top-p and min-p see T = 1. T <= 0 is greedy.
      return {top_k(k), top_p(tp, keep), min_p(m, keep), temperature(T <= 0.0 ? 0.0 : T)};
  }
  return {};
}

// One request on one row: the status, the processed row, the stages and the processed distribution.
struct engine_outcome {
  engine_status st = engine_status::ok;
  std::vector<float> processed;
  std::vector<stage> stages;
  distribution dist;
};

inline engine_outcome engine_process(std::span<const float> row, const engine_params& p, engine_order o,
                                     const engine_request& rq, const guide_fn* guide = nullptr) {
  engine_outcome out;
  out.stages = engine_stages(p, o);
  if (!request_valid(row.size(), p, o, rq)) {
    out.st = engine_status::invalid_input;
    out.dist.st = status::no_candidates;
    return out;
  }
  out.processed = apply_processors(row, p, o, rq);
  out.dist = finish(run(out.processed, out.stages, guide));
  out.st = to_engine(out.dist.st);
  return out;
}

// The reference with razor-close decisions following `member` (the library's survivors), as
// reference.hpp's guided_reference does for a chain.
inline engine_outcome engine_guided(std::span<const float> row, const engine_params& p, engine_order o,
                                    const engine_request& rq, const std::vector<char>& member) {
  auto guided = [&](choice absent) {
    guide_fn guide = [&, absent](std::int32_t id) {
      return member[static_cast<std::size_t>(id)] ? choice::keep : absent;
    };
    return engine_process(row, p, o, rq, &guide);
  };
  std::size_t n = static_cast<std::size_t>(std::count(member.begin(), member.end(), char{1}));
  auto same_set = [&](const distribution& d) {
    if (d.entries.size() != n) return false;
    for (auto& e : d.entries)
      if (!member[static_cast<std::size_t>(e.id)]) return false;
    return true;
  };
  engine_outcome ref = guided(choice::nominal);
  if (!same_set(ref.dist) && ref.dist.ambiguous > 0) {
    engine_outcome alt = guided(choice::drop);
    if (same_set(alt.dist)) return alt;
  }
  return ref;
}

// ---------------------------------------------------------------------------------------------
// Logprobs.

// The logit the stages rank by: 0 for each +inf token of a forced row (they tie), else the value.
inline std::vector<float> rank_logits(std::span<const float> x) {
  const bool forced = std::any_of(x.begin(), x.end(), [](float v) { return v == inf; });
  std::vector<float> r(x.begin(), x.end());
  if (forced)
    for (auto& v : r) v = v == inf ? 0.0f : -inf;
  return r;
}

// raw: 1 + the number of tokens of the row whose logit is strictly larger (NaN is never larger).
inline long long raw_rank(std::span<const float> row, std::int32_t token) {
  const float x = row[static_cast<std::size_t>(token)];
  return 1 + std::count_if(row.begin(), row.end(), [x](float v) { return v > x; });
}

// processed: 1 + the number of survivors with a strictly larger processed logit.
inline long long processed_rank(const engine_outcome& o, std::int32_t token) {
  if (o.dist.greedy) return 1;
  auto r = rank_logits(o.processed);
  const float x = r[static_cast<std::size_t>(token)];
  long long n = 1;
  for (auto& e : o.dist.entries)
    if (r[static_cast<std::size_t>(e.id)] > x) ++n;
  return n;
}

// processed top-n: the survivors by (processed logit desc, id asc); greedy rows are {argmax: 0}.
inline std::vector<token_logprob> processed_top(const engine_outcome& o, std::size_t n) {
  std::vector<token_logprob> out;
  if (o.st != engine_status::ok) return out;
  if (o.dist.greedy) {
    if (n > 0) out.push_back({o.dist.entries.front().id, 0.0});
    return out;
  }
  auto r = rank_logits(o.processed);
  std::vector<entry> e = o.dist.entries;
  std::sort(e.begin(), e.end(), [&](const entry& a, const entry& b) {
    float xa = r[static_cast<std::size_t>(a.id)], xb = r[static_cast<std::size_t>(b.id)];
    return xa != xb ? xa > xb : a.id < b.id;
  });
  for (std::size_t i = 0; i < e.size() && i < n; ++i) out.push_back({e[i].id, e[i].logprob});
  return out;
}

inline bool logprob_close(double lib, double ref) {
  // A log-probability below -FLT_MAX (a huge row's far tail) is -inf in float.
  if (ref < -static_cast<double>(std::numeric_limits<float>::max()) && lib == -INFINITY) return true;
  if (std::isinf(ref) || std::isinf(lib)) return lib == ref;
  return std::fabs(lib - ref) <= logprob_tol(ref);
}

// ---------------------------------------------------------------------------------------------
// Checking what the library returned (Catch2-free: each check returns "" or what is wrong).

struct observed_logprob {
  std::int32_t token;
  float logprob;
};

struct observed_result {
  engine_status st = engine_status::ok;
  std::int32_t token = -1;
  float logprob = 0.0f;
  long long rank = 0;
  std::size_t top_count = 0;
  std::vector<observed_logprob> top;  // the first top_count entries of the caller's span
};

inline std::string engine_context(std::span<const float> row, const engine_params& p, engine_order o,
                                  const engine_request& rq) {
  std::ostringstream os;
  os << "V=" << row.size() << " " << describe(p, o) << " " << describe(rq);
  return os.str();
}

// The library's process() for a request: status, set, order and probabilities.
inline std::string check_engine_distribution(std::span<const float> row, const engine_params& p,
                                             engine_order o, const engine_request& rq, engine_status lib_st,
                                             const observed& lib) {
  std::ostringstream err;
  err.precision(10);
  const std::size_t V = row.size();
  const std::string ctx = engine_context(row, p, o, rq);
  engine_outcome nominal = engine_process(row, p, o, rq);
  if (lib_st != nominal.st) {
    err << ctx << ": status " << to_string(lib_st) << ", reference " << to_string(nominal.st);
    return err.str();
  }
  if (lib.ids.size() != lib.probs.size()) return ctx + ": ids and probs differ in size";
  if (nominal.st != engine_status::ok) {
    if (!lib.ids.empty())
      err << ctx << ": " << lib.ids.size() << " entries with status " << to_string(lib_st);
    return err.str();
  }
  std::vector<char> member(V, 0);
  for (auto id : lib.ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= V)
      return ctx + ": id " + std::to_string(id) + " out of range";
    if (member[static_cast<std::size_t>(id)]) return ctx + ": id " + std::to_string(id) + " twice";
    member[static_cast<std::size_t>(id)] = 1;
  }
  // Order: sorted -> rank order of the processed row, else ascending id.
  auto r = rank_logits(nominal.processed);
  for (std::size_t i = 1; i < lib.ids.size(); ++i) {
    std::int32_t a = lib.ids[i - 1], b = lib.ids[i];
    float xa = r[static_cast<std::size_t>(a)], xb = r[static_cast<std::size_t>(b)];
    bool ok = lib.sorted ? (xa > xb || (xa == xb && a < b)) && lib.probs[i - 1] >= lib.probs[i] : a < b;
    if (!ok) {
      err << ctx << ": order broken at " << i << " (sorted=" << lib.sorted << "): id " << a << " then id "
          << b;
      return err.str();
    }
  }
  engine_outcome ref = engine_guided(row, p, o, rq, member);
  for (auto& e : ref.dist.entries) {
    if (!member[static_cast<std::size_t>(e.id)]) {
      err << ctx << ": token " << e.id << " (processed logit "
          << ref.processed[static_cast<std::size_t>(e.id)] << ", p " << e.prob << ") missing; library kept "
          << lib.ids.size() << ", reference " << ref.dist.entries.size() << " [" << describe(ref.stages)
          << "]";
      return err.str();
    }
  }
  for (std::size_t i = 0; i < lib.ids.size(); ++i) {
    const entry* e = ref.dist.find(lib.ids[i]);
    if (!e) {
      err << ctx << ": token " << lib.ids[i] << " (processed logit "
          << ref.processed[static_cast<std::size_t>(lib.ids[i])] << ", p " << lib.probs[i]
          << ") should not survive; library kept " << lib.ids.size() << ", reference "
          << ref.dist.entries.size() << " [" << describe(ref.stages) << "]";
      return err.str();
    }
    if (!prob_close(lib.probs[i], e->prob)) {
      err << ctx << ": token " << e->id << " p " << lib.probs[i] << ", reference " << e->prob;
      return err.str();
    }
  }
  return {};
}

// The library's sample() for a request, given its process() for the same request (already checked):
// status, the draw rule, logprob, rank and the top-n list in the request's logprobs mode.
inline std::string check_engine_result(std::span<const float> row, const engine_params& p, engine_order o,
                                       const engine_request& rq, const observed& lib_dist,
                                       const observed_result& res) {
  std::ostringstream err;
  err.precision(10);
  const std::string ctx = engine_context(row, p, o, rq);
  engine_outcome nominal = engine_process(row, p, o, rq);
  if (res.st != nominal.st) {
    err << ctx << ": sample status " << to_string(res.st) << ", reference " << to_string(nominal.st);
    return err.str();
  }
  if (res.st != engine_status::ok) {
    if (res.token != -1) err << ctx << ": token " << res.token << " with status " << to_string(res.st);
    if (res.st != engine_status::invalid_input && res.logprob != 0.0f)
      err << ctx << ": logprob " << res.logprob << " with status " << to_string(res.st);
    return err.str();
  }
  std::vector<char> member(row.size(), 0);
  for (auto id : lib_dist.ids) member[static_cast<std::size_t>(id)] = 1;
  engine_outcome ref = engine_guided(row, p, o, rq, member);
  const entry* e =
      res.token >= 0 && static_cast<std::size_t>(res.token) < row.size() ? ref.dist.find(res.token) : nullptr;
  if (!e || !member[static_cast<std::size_t>(res.token)]) {
    err << ctx << ": drew token " << res.token << ", not a survivor";
    return err.str();
  }
  // The draw rule over the library's distribution order.
  if (!ref.dist.greedy) {
    std::vector<double> probs;
    for (auto id : lib_dist.ids) probs.push_back(ref.dist.find(id) ? ref.dist.find(id)->prob : 0.0);
    double u = draw_uniform(p.seed, rq.position);
    draw_range dr = draw_positions(probs, u);
    bool hit = false;
    for (std::size_t i = dr.lo; i <= dr.hi && i < lib_dist.ids.size(); ++i)
      hit |= lib_dist.ids[i] == res.token;
    if (!hit) {
      err << ctx << ": u=" << u << " drew " << res.token << ", the draw rule gives " << lib_dist.ids[dr.lo];
      return err.str();
    }
  }
  // logprob, rank and top-n in the request's mode.
  // logprobs = -1 asks for nothing: the draw's own processed logprob, rank 0, no list.
  const bool nothing = p.logprobs < 0;
  const std::size_t n = nothing ? 0 : static_cast<std::size_t>(p.logprobs);
  const logprob_mode effective = nothing ? logprob_mode::processed : p.mode;
  double want_logprob;
  long long want_rank;
  std::vector<token_logprob> want_top;
  if (effective == logprob_mode::raw) {
    want_logprob = log_softmax(row)[static_cast<std::size_t>(res.token)];
    want_rank = raw_rank(row, res.token);
    want_top = top_logprobs(row, n);
  } else {
    want_logprob = ref.dist.greedy ? 0.0 : e->logprob;
    want_rank = nothing ? 0 : processed_rank(ref, res.token);
    want_top = processed_top(ref, n);
  }
  const char* mode = nothing ? "logprobs=-1" : effective == logprob_mode::raw ? "raw" : "processed";
  if (ref.dist.greedy && effective == logprob_mode::processed ? res.logprob != 0.0f
                                                              : !logprob_close(res.logprob, want_logprob)) {
    err << ctx << ": token " << res.token << " " << mode << " logprob " << res.logprob << ", reference "
        << want_logprob;
    return err.str();
  }
  if (res.rank != want_rank) {
    err << ctx << ": token " << res.token << " " << mode << " rank " << res.rank << ", reference "
        << want_rank;
    return err.str();
  }
  if (res.top_count != want_top.size()) {
    err << ctx << ": " << mode << " top_count " << res.top_count << ", reference " << want_top.size();
    return err.str();
  }
  for (std::size_t i = 0; i < want_top.size(); ++i) {
    const auto& got = res.top[i];
    if (got.token != want_top[i].token || !logprob_close(got.logprob, want_top[i].logprob)) {
      err << ctx << ": " << mode << " top[" << i << "] = {" << got.token << ", " << got.logprob
          << "}, reference {" << want_top[i].token << ", " << want_top[i].logprob << "}";
      return err.str();
    }
  }
  return {};
}

}  // namespace nucleus_ref
