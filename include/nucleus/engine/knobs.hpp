// The knob table: the one place a sampling_params field is described. validate() and check_order()
// below, the engine's chains (engine/orders.hpp), the sharded route (sharded/sampler.hpp), the
// server's JSON (tools/server/api.hpp) and the Python keywords (python/) all read it; none keeps its
// own list. Adding a knob: its field in params.hpp, its row here, its stage; tests/engine/knobs.cpp
// then checks that every layer follows.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nucleus/engine/orders.hpp"
#include "nucleus/engine/params.hpp"

namespace nucleus {

// What a knob holds. Numbers go through the table's range; the other kinds have their own parsing
// (the server's logit_bias object, token-id arrays) but are still described here.
enum class knob_kind : std::uint8_t { real, integer, token_ids, bias, breakers, seed, logprobs, mode };

// How a row split across shards (sharded/sampler.hpp) treats a knob that is on.
enum class shard_rule : std::uint8_t {
  route,        // a cut-independent route of its own (temperature, top-k, top-p, min-p)
  elementwise,  // a processor: each shard applies it to its own slice
  gather,       // the shards' slices are gathered and the row is sampled whole
  none,         // not part of the distribution (seed, logprobs)
};

// Where a request to the server carries it: at the top level (the OpenAI API and vLLM's extensions
// spell it so), inside the "nucleus" object (llama.cpp's server names), or not at all.
enum class json_place : std::uint8_t { top, extension, none };

struct engine_set {
  std::uint8_t bits = 0;
  constexpr bool has(engine_order o) const { return (bits >> static_cast<int>(o)) & 1u; }
};
inline constexpr engine_set all_engines{0xF};
constexpr engine_set engines(std::initializer_list<engine_order> os) {
  std::uint8_t b = 0;
  for (engine_order o : os) b = static_cast<std::uint8_t>(b | (1u << static_cast<int>(o)));
  return {b};
}

struct knob {
  const char* name;  // as llama.cpp's server, HF and the OpenAI API spell it
  knob_kind kind;
  float sampling_params::*real = nullptr;   // kind::real
  int sampling_params::*integer = nullptr;  // kind::integer
  // The valid range of a number, ends included unless open; a real must also be finite.
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  const char* rule = "";                         // the error text: "must be ..."
  bool (*on)(const sampling_params&) = nullptr;  // off at its default; on when it changes the draw
  detail::slot where = detail::slot::none;       // its stage's slot; none for processors and modifiers
  engine_set in{};                               // the orders that have it, when where is none
  bool truncates = false;                        // mirostat replaces it
  shard_rule shard = shard_rule::none;
  json_place place = json_place::none;
  // The knob it only modifies: it acts when that one is on, in the orders that have it (`in`, or its
  // slot's); the other orders ignore it rather than refuse it (penalty_last_n: their penalties read the
  // whole history).
  const char* modifies = nullptr;
  double probe = 0;  // a valid value at which it acts (tests/engine/knobs.cpp)

  // Whether an engine order has it: the orders holding its stage's slot, else `in`.
  constexpr bool in_order(engine_order o) const {
    return where == detail::slot::none ? in.has(o) : detail::has_slot(o, where);
  }
  constexpr bool number() const { return kind == knob_kind::real || kind == knob_kind::integer; }
  double get(const sampling_params& p) const { return real ? double(p.*real) : double(p.*integer); }
  // Sets a number (a float or int field); the caller checked it is a number knob.
  void set(sampling_params& p, double v) const {
    if (real)
      p.*real = static_cast<float>(v);
    else
      p.*integer = static_cast<int>(v);
  }
  bool in_range(double v) const {
    if (std::isnan(v) || (kind == knob_kind::real && std::isinf(v))) return false;
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
};

namespace detail {
using P = sampling_params;
using K = knob_kind;
using S = shard_rule;
using J = json_place;
using E = engine_order;
inline constexpr double int_hi = std::numeric_limits<int>::max();
}  // namespace detail

// Every sampling_params field, in declaration order. A field without a row fails to compile
// (static_assert below); a row whose stage ignores it fails tests/engine/knobs.cpp.
inline constexpr knob knobs[] = {
    // clang-format off
    {.name = "temperature", .kind = detail::K::real, .real = &detail::P::temperature, .lo = 0,
     .rule = "must be finite and >= 0 (0 means greedy)", .on = [](const detail::P& p) { return p.temperature != 1.0f; },
     .where = detail::slot::temp, .shard = detail::S::route, .place = detail::J::top, .probe = 0.5},
    {.name = "top_k", .kind = detail::K::integer, .integer = &detail::P::top_k, .lo = -1, .hi = detail::int_hi,
     .rule = "must be >= -1 (-1 and 0 disable)", .on = [](const detail::P& p) { return p.top_k > 0; },
     .where = detail::slot::top_k, .truncates = true, .shard = detail::S::route, .place = detail::J::top, .probe = 3},
    {.name = "top_p", .kind = detail::K::real, .real = &detail::P::top_p, .lo = 0, .hi = 1, .lo_open = true,
     .rule = "must be in (0, 1]", .on = [](const detail::P& p) { return p.top_p < 1.0f; },
     .where = detail::slot::top_p, .truncates = true, .shard = detail::S::route, .place = detail::J::top, .probe = 0.6},
    {.name = "min_p", .kind = detail::K::real, .real = &detail::P::min_p, .lo = 0, .hi = 1,
     .rule = "must be in [0, 1]", .on = [](const detail::P& p) { return p.min_p > 0.0f; },
     .where = detail::slot::min_p, .truncates = true, .shard = detail::S::route, .place = detail::J::top, .probe = 0.2},
    {.name = "typical_p", .kind = detail::K::real, .real = &detail::P::typical_p, .lo = 0, .hi = 1, .lo_open = true,
     .rule = "must be in (0, 1] (1 disables)", .on = [](const detail::P& p) { return p.typical_p < 1.0f; },
     .where = detail::slot::typical, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 0.3},
    {.name = "top_n_sigma", .kind = detail::K::real, .real = &detail::P::top_n_sigma,
     .rule = "must be finite (<= 0 disables)", .on = [](const detail::P& p) { return p.top_n_sigma > 0.0f; },
     .where = detail::slot::sigma, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 0.5},
    {.name = "xtc_probability", .kind = detail::K::real, .real = &detail::P::xtc_probability, .lo = 0, .hi = 1,
     .rule = "must be in [0, 1]", .on = [](const detail::P& p) { return p.xtc_probability > 0.0f && p.xtc_threshold <= 0.5f; },
     .where = detail::slot::xtc, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 1},
    {.name = "xtc_threshold", .kind = detail::K::real, .real = &detail::P::xtc_threshold, .lo = 0, .hi = 1,
     .rule = "must be in [0, 1] (> 0.5 disables)", .on = [](const detail::P&) { return false; },
     .where = detail::slot::xtc, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension,
     .modifies = "xtc_probability", .probe = 0.02},
    {.name = "epsilon_cutoff", .kind = detail::K::real, .real = &detail::P::epsilon_cutoff, .lo = 0, .hi = 1, .hi_open = true,
     .rule = "must be in [0, 1) (0 disables)", .on = [](const detail::P& p) { return p.epsilon_cutoff > 0.0f; },
     .where = detail::slot::eps, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 0.05},
    {.name = "eta_cutoff", .kind = detail::K::real, .real = &detail::P::eta_cutoff, .lo = 0, .hi = 1, .hi_open = true,
     .rule = "must be in [0, 1) (0 disables)", .on = [](const detail::P& p) { return p.eta_cutoff > 0.0f; },
     .where = detail::slot::eta, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 0.05},
    {.name = "dynatemp_range", .kind = detail::K::real, .real = &detail::P::dynatemp_range,
     .rule = "must be finite (<= 0 disables)", .on = [](const detail::P& p) { return p.dynatemp_range > 0.0f; },
     .where = detail::slot::dyn, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension, .probe = 0.8},
    {.name = "dynatemp_exponent", .kind = detail::K::real, .real = &detail::P::dynatemp_exponent, .lo = 0,
     .rule = "must be finite and >= 0", .on = [](const detail::P&) { return false; },
     .where = detail::slot::dyn, .truncates = true, .shard = detail::S::gather, .place = detail::J::extension,
     .modifies = "dynatemp_range", .probe = 3},
    {.name = "mirostat", .kind = detail::K::integer, .integer = &detail::P::mirostat, .lo = 0, .hi = 2,
     .rule = "must be 0 (off), 1 or 2", .on = [](const detail::P& p) { return p.mirostat != 0; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::gather, .place = detail::J::extension, .probe = 2},
    {.name = "mirostat_tau", .kind = detail::K::real, .real = &detail::P::mirostat_tau, .lo = 0,
     .rule = "must be finite and >= 0", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::gather, .place = detail::J::extension,
     .modifies = "mirostat", .probe = 0.5},
    {.name = "mirostat_eta", .kind = detail::K::real, .real = &detail::P::mirostat_eta, .lo = 0,
     .rule = "must be finite and >= 0", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::gather, .place = detail::J::extension,
     .modifies = "mirostat", .probe = 0.9},
    {.name = "min_keep", .kind = detail::K::integer, .integer = &detail::P::min_keep, .lo = 1, .hi = detail::int_hi,
     .rule = "must be >= 1 (1 is no floor; llama.cpp's 0 means 1)", .on = [](const detail::P& p) { return p.min_keep > 1; },
     .in = engines({detail::E::nucleus, detail::E::hf, detail::E::llama_cpp}), .truncates = true, .shard = detail::S::gather,
     .place = detail::J::extension, .modifies = "top_p", .probe = 6},
    {.name = "repetition_penalty", .kind = detail::K::real, .real = &detail::P::repetition_penalty, .lo = 0, .lo_open = true,
     .rule = "must be finite and > 0 (1 disables)", .on = [](const detail::P& p) { return p.repetition_penalty != 1.0f; },
     .in = all_engines, .shard = detail::S::elementwise, .place = detail::J::top, .probe = 1.5},
    {.name = "presence_penalty", .kind = detail::K::real, .real = &detail::P::presence_penalty,
     .rule = "must be finite", .on = [](const detail::P& p) { return p.presence_penalty != 0.0f; },
     .in = engines({detail::E::nucleus, detail::E::vllm, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::top, .probe = 1},
    {.name = "frequency_penalty", .kind = detail::K::real, .real = &detail::P::frequency_penalty,
     .rule = "must be finite", .on = [](const detail::P& p) { return p.frequency_penalty != 0.0f; },
     .in = engines({detail::E::nucleus, detail::E::vllm, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::top, .probe = 1},
    {.name = "penalty_last_n", .kind = detail::K::integer, .integer = &detail::P::penalty_last_n, .lo = -1, .hi = detail::int_hi,
     .rule = "must be -1 (all), 0 (none) or a count", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::llama_cpp}), .shard = detail::S::elementwise, .place = detail::J::extension,
     .modifies = "repetition_penalty", .probe = 1},
    {.name = "dry_multiplier", .kind = detail::K::real, .real = &detail::P::dry_multiplier, .lo = 0,
     .rule = "must be finite and >= 0 (0 disables)", .on = [](const detail::P& p) { return p.dry_multiplier > 0.0f; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::extension, .probe = 2},
    {.name = "dry_base", .kind = detail::K::real, .real = &detail::P::dry_base, .lo = 1,
     .rule = "must be finite and >= 1", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::extension, .modifies = "dry_multiplier", .probe = 3},
    {.name = "dry_allowed_length", .kind = detail::K::integer, .integer = &detail::P::dry_allowed_length, .lo = 0, .hi = detail::int_hi,
     .rule = "must be >= 0", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::extension, .modifies = "dry_multiplier", .probe = 1},
    {.name = "dry_penalty_last_n", .kind = detail::K::integer, .integer = &detail::P::dry_penalty_last_n, .lo = -1, .hi = detail::int_hi,
     .rule = "must be -1 (all), 0 (none) or a count", .on = [](const detail::P&) { return false; },
     .in = engines({detail::E::nucleus, detail::E::llama_cpp}), .shard = detail::S::elementwise,
     .place = detail::J::extension, .modifies = "dry_multiplier", .probe = 0},
    {.name = "dry_sequence_breakers", .kind = detail::K::breakers, .rule = "a breaker must hold at least one token",
     .on = [](const detail::P&) { return false; }, .in = engines({detail::E::nucleus, detail::E::llama_cpp}),
     .shard = detail::S::elementwise, .place = detail::J::extension, .modifies = "dry_multiplier"},
    {.name = "no_repeat_ngram_size", .kind = detail::K::integer, .integer = &detail::P::no_repeat_ngram_size, .lo = 0, .hi = detail::int_hi,
     .rule = "must be >= 0 (0 disables)", .on = [](const detail::P& p) { return p.no_repeat_ngram_size > 0; },
     .in = engines({detail::E::nucleus, detail::E::hf}), .shard = detail::S::elementwise, .place = detail::J::extension, .probe = 2},
    {.name = "logit_bias", .kind = detail::K::bias, .rule = "biases must be finite, ids >= 0",
     .on = [](const detail::P& p) { return !p.logit_bias.empty(); }, .in = all_engines, .shard = detail::S::elementwise,
     .place = detail::J::top},
    {.name = "allowed_token_ids", .kind = detail::K::token_ids, .rule = "token ids must be >= 0",
     .on = [](const detail::P& p) { return !p.allowed_token_ids.empty(); }, .in = all_engines,
     .shard = detail::S::elementwise, .place = detail::J::extension},
    {.name = "banned_token_ids", .kind = detail::K::token_ids, .rule = "token ids must be >= 0",
     .on = [](const detail::P& p) { return !p.banned_token_ids.empty(); }, .in = all_engines,
     .shard = detail::S::elementwise, .place = detail::J::extension},
    {.name = "min_tokens", .kind = detail::K::integer, .integer = &detail::P::min_tokens, .lo = 0, .hi = detail::int_hi,
     .rule = "must be >= 0", .on = [](const detail::P& p) { return p.min_tokens > 0; }, .in = all_engines,
     .shard = detail::S::elementwise, .place = detail::J::top, .probe = 9},
    // The model's end-of-sequence ids: the server takes them from the model, not the request.
    {.name = "eos_token_ids", .kind = detail::K::token_ids, .rule = "token ids must be >= 0",
     .on = [](const detail::P&) { return false; }, .in = all_engines, .shard = detail::S::elementwise,
     .modifies = "min_tokens"},
    {.name = "seed", .kind = detail::K::seed, .in = all_engines, .place = detail::J::top},
    {.name = "logprobs", .kind = detail::K::logprobs, .lo = -1, .hi = max_logprobs,
     .rule = "must be -1 (none) or in [0, 64]", .in = all_engines, .place = detail::J::top},
    {.name = "logprobs_mode", .kind = detail::K::mode, .rule = "must be raw or processed", .in = all_engines,
     .place = detail::J::extension},
    // clang-format on
};

namespace detail {

// The number of fields of an aggregate: the most initializers it accepts.
struct any_field {
  template <class T>
  operator T() const;
};
template <class T, class... A>
constexpr std::size_t field_count() {
  if constexpr (requires { T{A{}..., any_field{}}; })
    return field_count<T, A..., any_field>();
  else
    return sizeof...(A);
}

}  // namespace detail

static_assert(detail::field_count<sampling_params>() == std::size(knobs),
              "nucleus: every sampling_params field needs its row in the knob table (engine/knobs.hpp)");

// The row named `name`, or nullptr.
constexpr const knob* find_knob(std::string_view name) {
  for (const knob& k : knobs)
    if (name == k.name) return &k;
  return nullptr;
}

namespace detail {

[[noreturn]] inline void bad_param(const char* field, const std::string& what) {
  throw std::invalid_argument(std::string("nucleus::sampling_params.") + field + ": " + what);
}

inline void check_ids(const char* field, const std::vector<std::int32_t>& ids) {
  for (std::int32_t t : ids)
    if (t < 0) bad_param(field, "token id " + std::to_string(t) + " is negative");
}

}  // namespace detail

// A preset rejects the fields its engine has no stage for; mirostat replaces the truncation stages.
inline void check_order(const sampling_params& p, engine_order order) {
  using detail::bad_param;
  const detail::engine_order_info& info = detail::order_info(order);
  for (const knob& k : knobs) {
    if (!k.on || !k.on(p)) continue;
    if (!k.in_order(order))
      bad_param(k.name,
                std::string("the ") + info.name + " order has no such stage (" + info.engine + " has none)");
    if (p.mirostat != 0 && k.truncates)
      bad_param(k.name, "mirostat replaces the truncation stages: leave this field at its default");
  }
  // llama.cpp's mirostat chain is logit bias, temperature, mirostat: no penalties there.
  if (p.mirostat != 0 && order == engine_order::llama_cpp)
    for (const char* name : {"repetition_penalty", "presence_penalty", "frequency_penalty", "dry_multiplier"})
      if (find_knob(name)->on(p)) bad_param(name, "llama.cpp applies no penalty with mirostat");
}

// Throws std::invalid_argument naming the first bad field. Ids are checked against the vocabulary
// when a row is sampled (status::invalid_input), since a sampler does not know V.
inline void validate(const sampling_params& p, engine_order order) {
  using detail::bad_param;
  for (const knob& k : knobs)
    if (k.number() && !k.in_range(k.get(p))) bad_param(k.name, k.rule);
  for (const auto& seq : p.dry_sequence_breakers) {
    if (seq.empty()) bad_param("dry_sequence_breakers", "a breaker must hold at least one token");
    detail::check_ids("dry_sequence_breakers", seq);
  }
  check_order(p, order);
  for (const token_bias& b : p.logit_bias) {
    if (b.token < 0) bad_param("logit_bias", "token id " + std::to_string(b.token) + " is negative");
    if (!std::isfinite(b.bias)) bad_param("logit_bias", "bias must be finite");
  }
  detail::check_ids("allowed_token_ids", p.allowed_token_ids);
  detail::check_ids("banned_token_ids", p.banned_token_ids);
  detail::check_ids("eos_token_ids", p.eos_token_ids);
  if (p.logprobs < -1 || p.logprobs > max_logprobs) bad_param("logprobs", find_knob("logprobs")->rule);
}

}  // namespace nucleus
