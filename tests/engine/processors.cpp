// The engine's processors (masks, logit_bias, penalties) against the engine reference and against
// hand-computed rows: each alone, combined, their fixed order, the penalty histories, bitmasks and
// invalid input.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "engine/engine_cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using engine_cases::check;
using engine_cases::error_log;

namespace {

constexpr std::size_t vocabs[] = {1, 7, 1000, 151936};

// softmax in double of a processed row at T = 1 (finite entries only), by id.
std::vector<double> softmax(const std::vector<float>& x) {
  double m = -INFINITY;
  for (float v : x)
    if (std::isfinite(v)) m = std::max(m, static_cast<double>(v));
  std::vector<double> p(x.size(), 0.0);
  double z = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(x[i])) z += p[i] = std::exp(static_cast<double>(x[i]) - m);
  for (auto& v : p) v /= z;
  return p;
}

// The library's distribution (T = 1, nothing truncated) must be softmax(expected) over its finite tokens.
std::string matches_row(const std::vector<float>& row, const ref::engine_params& p, ref::engine_order o,
                        const ref::engine_request& rq, const std::vector<float>& expected) {
  nc::workspace ws;
  nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
  nc::distribution d = s.process(std::span<const float>(row), ws, engine_cases::view(rq));
  auto want = softmax(expected);
  std::size_t finite = 0;
  for (float v : expected) finite += std::isfinite(v);
  std::string ctx = std::string(ref::to_string(o)) + ": ";
  if (d.status() != nc::status::ok) return ctx + "status " + std::string(nc::to_string(d.status()));
  if (d.size() != finite)
    return ctx + std::to_string(d.size()) + " survivors, want " + std::to_string(finite);
  for (std::size_t i = 0; i < d.size(); ++i) {
    auto id = static_cast<std::size_t>(d.ids()[i]);
    if (id >= row.size() || !std::isfinite(expected[id]) || !ref::prob_close(d.probs()[i], want[id]))
      return ctx + "token " + std::to_string(id) + " p " + std::to_string(d.probs()[i]) + ", want " +
             std::to_string(id < want.size() ? want[id] : -1.0);
  }
  return {};
}

ref::engine_params plain() {
  return ref::engine_params{};  // T = 1, nothing truncated, no processor
}

}  // namespace

TEST_CASE("engine processors: each alone matches the reference", "[engine][processors]") {
  using setup = std::function<void(std::size_t V, const std::vector<float>& row, ref::rng& g,
                                   ref::engine_params&, ref::engine_request&)>;
  auto top_token = [](const std::vector<float>& row) { return ref::argmax(row); };
  struct named {
    const char* name;
    setup fn;
    bool penalizes_counts;  // presence / frequency (hf rejects them)
  };
  const named processors[] = {
      {"bitmask",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params&,
          ref::engine_request& rq) {
         rq.bitmask.assign(ref::bitmask_words(V), 0u);
         for (auto& w : rq.bitmask) w = static_cast<std::uint32_t>(g.next());
         rq.bitmask[0] |= 1u;  // token 0 allowed, so something survives
       },
       false},
      {"allowed",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request&) {
         p.allowed_token_ids = engine_cases::random_ids(V, 1 + g.below(std::min<std::size_t>(V, 300)), g);
       },
       false},
      {"banned",
       [&](std::size_t V, const std::vector<float>& row, ref::rng& g, ref::engine_params& p,
           ref::engine_request&) {
         p.banned_token_ids = {top_token(row)};
         for (int i = 0; i < 3; ++i) p.banned_token_ids.push_back(static_cast<std::int32_t>(g.below(V)));
       },
       false},
      {"min_tokens/eos (active)",
       [&](std::size_t V, const std::vector<float>& row, ref::rng& g, ref::engine_params& p,
           ref::engine_request& rq) {
         p.eos_token_ids = {top_token(row), static_cast<std::int32_t>(g.below(V))};
         p.min_tokens = 3;
         rq.output = {static_cast<std::int32_t>(g.below(V)), static_cast<std::int32_t>(g.below(V))};
       },
       false},
      {"logit_bias (repeated token adds again)",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request&) {
         auto a = static_cast<std::int32_t>(g.below(V)), b = static_cast<std::int32_t>(g.below(V));
         p.logit_bias = {{a, 2.5f}, {b, -3.0f}, {a, 1.75f}, {static_cast<std::int32_t>(V - 1), 0.3f}};
       },
       false},
      {"repetition_penalty > 1",
       [&](std::size_t V, const std::vector<float>& row, ref::rng& g, ref::engine_params& p,
           ref::engine_request& rq) {
         p.repetition_penalty = 1.3f;
         rq.prompt = engine_cases::random_ids(V, 20, g);
         rq.prompt.push_back(top_token(row));
         rq.output = engine_cases::random_ids(V, 6, g);
       },
       false},
      {"repetition_penalty < 1",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request& rq) {
         p.repetition_penalty = 0.7f;
         rq.prompt = engine_cases::random_ids(V, 10, g);
         rq.output = engine_cases::random_ids(V, 10, g);
       },
       false},
      {"presence",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request& rq) {
         p.presence_penalty = 0.8f;
         rq.prompt = engine_cases::random_ids(V, 10, g);
         rq.output = engine_cases::random_ids(V, 12, g);
       },
       true},
      {"frequency",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request& rq) {
         p.frequency_penalty = 0.6f;
         rq.prompt = engine_cases::random_ids(V, 10, g);
         rq.output = engine_cases::random_ids(V, 12, g);
       },
       true},
      {"presence + frequency, negative",
       [](std::size_t V, const std::vector<float>&, ref::rng& g, ref::engine_params& p,
          ref::engine_request& rq) {
         p.presence_penalty = -0.4f;
         p.frequency_penalty = -0.3f;
         rq.output = engine_cases::random_ids(V, 12, g);
       },
       true},
  };
  error_log log;
  std::size_t exercised = 0;
  nc::workspace ws;
  for (std::size_t V : vocabs) {
    ref::rng g(0xE1 ^ V);
    for (const named& proc : processors) {
      for (ref::engine_order o : ref::all_engine_orders) {
        if (proc.penalizes_counts && o == ref::engine_order::hf) continue;
        for (int variant = 0; variant < (V >= 100000 ? 1 : 3); ++variant) {
          auto row = variant == 2 ? ref::uniform_row(V, g) : ref::peaky_row(V, g);
          ref::engine_params p = plain();
          ref::engine_request rq;
          rq.position = g.below(1000);
          p.seed = g.next();
          proc.fn(V, row, g, p, rq);
          if (o == ref::engine_order::llama_cpp) p.penalty_last_n = -1;  // the whole history, as the others
          if (variant == 1) {  // with truncating stages after the processor
            p.temperature = 0.8f;
            p.top_k = 50;
            p.top_p = 0.9f;
            p.min_p = 0.02f;
          }
          p.logprobs = 5;
          p.mode = variant == 1 ? ref::logprob_mode::processed : ref::logprob_mode::raw;
          // The case must exercise the processor: the reference's processed row differs from the input.
          if (V >= 7 && ref::request_valid(V, p, o, rq)) {
            auto x = ref::apply_processors(row, p, o, rq);
            bool changed = false;
            for (std::size_t i = 0; i < V; ++i) changed |= ref::float_bits(x[i]) != ref::float_bits(row[i]);
            exercised += changed;
            if (!changed) log.add(std::string(proc.name) + ": the case does not exercise the processor");
          }
          log.add(check(row, p, o, rq, ws));
        }
      }
    }
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 300);
  CHECK(exercised > 100);
}

TEST_CASE("engine processors: random combined requests match the reference", "[engine][processors]") {
  error_log log;
  nc::workspace ws;
  for (std::size_t V : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{33}, std::size_t{64},
                        std::size_t{65}, std::size_t{1000}, std::size_t{151936}}) {
    ref::rng g(0xC0B1 ^ (V * 0x9E3779B97F4A7C15ull));
    const bool big = V > 100000;
    for (ref::engine_order o : ref::all_engine_orders) {
      for (ref::row_kind kind : ref::all_row_kinds) {
        if (big && kind != ref::row_kind::peaky && kind != ref::row_kind::neg_inf) continue;
        for (int rep = 0; rep < (big ? 2 : V >= 1000 ? 4 : 12); ++rep) {
          auto row = ref::make_row(kind, V, g);
          auto p = engine_cases::random_params(V, o, g);
          auto rq = engine_cases::random_request(V, g);
          std::string e = check(row, p, o, rq, ws);
          log.add(engine_cases::tagged(ref::to_string(kind), e));
        }
      }
    }
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 2500);
}

TEST_CASE("engine processors: masks, then logit_bias, then repetition, then presence/frequency",
          "[engine][processors]") {
  // Hand-computed processed rows, independent of the reference (which must agree too).
  const std::vector<float> row = {-1.0f, 1.0f, 0.5f, 3.0f, 2.0f};
  SECTION("logit_bias before the repetition penalty") {
    // token 0: -1 + 2 = 1 > 0, so the penalty divides: 0.5 (penalty first would give -2 + 2 = 0).
    ref::engine_params p = plain();
    p.logit_bias = {{0, 2.0f}};
    p.repetition_penalty = 2.0f;
    ref::engine_request rq{{0}, {}, {}, 0};
    const std::vector<float> want = {0.5f, 1.0f, 0.5f, 3.0f, 2.0f};
    for (auto o : ref::all_engine_orders) {
      CHECK(ref::apply_processors(row, p, o, rq) == want);
      CHECK(matches_row(row, p, o, rq, want) == "");
    }
  }
  SECTION("the repetition penalty before presence/frequency") {
    // token 1: 1 / 2 = 0.5, then 0.5 - (2 * 0.5 + 1) = -1.5 (the other way: (1 - 2) * 2 = -2).
    // token 0: -1 * 2 = -2 (a negative logit is multiplied), then -2 - (0.5 + 1) = -3.5.
    ref::engine_params p = plain();
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 1.0f;
    p.frequency_penalty = 0.5f;
    ref::engine_request rq{{}, {0, 1, 1}, {}, 0};
    const std::vector<float> want = {-3.5f, -1.5f, 0.5f, 3.0f, 2.0f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::llama_cpp}) {
      CHECK(ref::apply_processors(row, p, o, rq) == want);
      CHECK(matches_row(row, p, o, rq, want) == "");
    }
  }
  SECTION("a banned token stays banned whatever the bias and penalties") {
    ref::engine_params p = plain();
    p.banned_token_ids = {3};
    p.logit_bias = {{3, 100.0f}};
    p.repetition_penalty = 0.5f;
    p.presence_penalty = -5.0f;
    ref::engine_request rq{{3}, {3}, {}, 0};
    const std::vector<float> want = {-1.0f, 1.0f, 0.5f, -INFINITY, 2.0f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::llama_cpp}) {
      CHECK(matches_row(row, p, o, rq, want) == "");
      nc::workspace ws;
      CHECK(check(row, p, o, rq, ws) == "");
    }
  }
  SECTION("-inf and NaN stay as they are under bias and penalties") {
    const std::vector<float> holes = {-INFINITY, NAN, 1.0f, 2.0f};
    ref::engine_params p = plain();
    p.logit_bias = {{0, 50.0f}, {1, 50.0f}};
    p.repetition_penalty = 0.5f;
    p.presence_penalty = -10.0f;
    p.frequency_penalty = -3.0f;
    ref::engine_request rq{{0, 1}, {0, 1, 0}, {}, 0};
    const std::vector<float> want = {-INFINITY, NAN, 1.0f, 2.0f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::llama_cpp}) {
      CHECK(matches_row(holes, p, o, rq, want) == "");
      nc::workspace ws;
      CHECK(check(holes, p, o, rq, ws) == "");
    }
  }
  SECTION("allowed ∩ banned is banned; min_tokens bans eos only while output is shorter") {
    ref::engine_params p = plain();
    p.allowed_token_ids = {1, 3, 4};
    p.banned_token_ids = {1};
    p.eos_token_ids = {3};
    p.min_tokens = 2;
    for (auto o : ref::all_engine_orders) {
      ref::engine_request shorter{{}, {0}, {}, 0}, enough{{}, {0, 2}, {}, 0};
      CHECK(matches_row(row, p, o, shorter, {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 2.0f}) == "");
      CHECK(matches_row(row, p, o, enough, {-INFINITY, -INFINITY, -INFINITY, 3.0f, 2.0f}) == "");
    }
  }
}

TEST_CASE("engine processors: penalty histories", "[engine][processors]") {
  const std::vector<float> row = {4.0f, 3.0f, 2.0f, 1.0f, -1.0f, -2.0f, 0.5f, 1.5f};
  SECTION("the repetition penalty applies once per distinct token, over prompt and output") {
    ref::engine_params p = plain();
    p.repetition_penalty = 2.0f;
    ref::engine_request rq{{0, 0, 0, 4}, {0, 5, 5}, {}, 0};
    // 4 / 2 (not / 2^4), -1 * 2, -2 * 2.
    const std::vector<float> want = {2.0f, 3.0f, 2.0f, 1.0f, -2.0f, -4.0f, 0.5f, 1.5f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::hf}) {
      CHECK(ref::apply_processors(row, p, o, rq) == want);
      CHECK(matches_row(row, p, o, rq, want) == "");
    }
    p.penalty_last_n = -1;
    CHECK(matches_row(row, p, ref::engine_order::llama_cpp, rq, want) == "");
  }
  SECTION("presence/frequency count output only (nucleus, vllm); duplicates counted") {
    ref::engine_params p = plain();
    p.presence_penalty = 0.25f;
    p.frequency_penalty = 0.5f;
    ref::engine_request rq{{1, 1, 2}, {0, 0, 0, 6}, {}, 0};
    // token 0: 4 - (3 * 0.5 + 0.25) = 2.25; token 6: 0.5 - (0.5 + 0.25) = -0.25; prompt tokens untouched.
    const std::vector<float> want = {2.25f, 3.0f, 2.0f, 1.0f, -1.0f, -2.0f, -0.25f, 1.5f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm}) {
      CHECK(ref::apply_processors(row, p, o, rq) == want);
      CHECK(matches_row(row, p, o, rq, want) == "");
    }
  }
  SECTION("llama_cpp: all three over the last penalty_last_n tokens of prompt then output") {
    ref::engine_params p = plain();
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.25f;
    p.frequency_penalty = 0.5f;
    ref::engine_request rq{{0, 1, 2, 3, 7}, {7, 6}, {}, 0};
    const auto o = ref::engine_order::llama_cpp;
    // penalty_last_n = 3: the last three of 0 1 2 3 7 | 7 6 are 7, 7, 6.
    p.penalty_last_n = 3;
    // 7: 1.5 / 2 = 0.75, - (2 * 0.5 + 0.25) = -0.5; 6: 0.25 - 0.75 = -0.5. Token 3 is outside.
    CHECK(matches_row(row, p, o, rq, {4.0f, 3.0f, 2.0f, 1.0f, -1.0f, -2.0f, -0.5f, -0.5f}) == "");
    // penalty_last_n = 4: token 3 (the last prompt token) enters: 1 / 2 = 0.5, - 0.75 = -0.25.
    p.penalty_last_n = 4;
    CHECK(matches_row(row, p, o, rq, {4.0f, 3.0f, 2.0f, -0.25f, -1.0f, -2.0f, -0.5f, -0.5f}) == "");
    // 0: no penalty at all.
    p.penalty_last_n = 0;
    CHECK(matches_row(row, p, o, rq, row) == "");
    // -1 and a window longer than the history: everything; prompt tokens are counted too.
    const std::vector<float> all = {1.25f, 0.75f, 0.25f, -0.25f, -1.0f, -2.0f, -0.5f, -0.5f};
    for (long long n : {-1LL, 7LL, 64LL}) {
      p.penalty_last_n = n;
      CHECK(ref::apply_processors(row, p, o, rq) == all);
      CHECK(matches_row(row, p, o, rq, all) == "");
    }
  }
  SECTION("the other orders ignore penalty_last_n") {
    ref::engine_params p = plain();
    p.repetition_penalty = 2.0f;
    p.penalty_last_n = 1;
    ref::engine_request rq{{0, 1}, {2}, {}, 0};
    const std::vector<float> want = {2.0f, 1.5f, 1.0f, 1.0f, -1.0f, -2.0f, 0.5f, 1.5f};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::hf})
      CHECK(matches_row(row, p, o, rq, want) == "");
    p.presence_penalty = 1.0f;
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm})
      CHECK(matches_row(row, p, o, rq, {2.0f, 1.5f, 0.0f, 1.0f, -1.0f, -2.0f, 0.5f, 1.5f}) == "");
  }
  SECTION("random histories with heavy repetition, every order") {
    error_log log;
    nc::workspace ws;
    ref::rng g(0x415);
    for (int rep = 0; rep < 200; ++rep) {
      std::size_t V = 1 + g.below(60);
      auto o = ref::all_engine_orders[g.below(4)];
      ref::engine_params p = plain();
      p.repetition_penalty = engine_cases::f(g.uniform(0.5, 2.0));
      if (o != ref::engine_order::hf) {
        p.presence_penalty = engine_cases::f(g.uniform(-1.0, 1.0));
        p.frequency_penalty = engine_cases::f(g.uniform(-1.0, 1.0));
      }
      p.penalty_last_n = static_cast<long long>(g.below(30)) - 1;
      p.logprobs = 3;
      ref::engine_request rq;
      rq.prompt = engine_cases::random_ids(V, g.below(50), g);
      rq.output = engine_cases::random_ids(V, g.below(50), g);
      log.add(check(ref::uniform_row(V, g), p, o, rq, ws));
    }
    INFO(log.summary());
    CHECK(log.count == 0);
    CHECK(log.checked >= 150);
  }
}

TEST_CASE("engine processors: bitmask layout and edges", "[engine][processors][bitmask]") {
  nc::workspace ws;
  ref::rng g(0xB17);
  for (std::size_t V : {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{63},
                        std::size_t{64}, std::size_t{65}, std::size_t{1000}, std::size_t{151936}}) {
    INFO("V=" << V);
    auto row = ref::uniform_row(V, g);
    ref::engine_params p = plain();
    p.logprobs = 2;
    const std::size_t words = ref::bitmask_words(V);
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
      // One bit: only that token survives, with probability 1 (token i is bit i % 32 of word i / 32).
      for (std::size_t t : {std::size_t{0}, std::size_t{31}, std::size_t{32}, std::size_t{63},
                            std::size_t{64}, V / 2, V - 1}) {
        if (t >= V) continue;
        ref::engine_request rq;
        rq.bitmask.assign(words, 0u);
        rq.bitmask[t / 32] = 1u << (t % 32);
        auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, rq);
        CHECK(lib.dist.ids == std::vector<std::int32_t>{static_cast<std::int32_t>(t)});
        CHECK(lib.result.token == static_cast<std::int32_t>(t));
        CHECK(check(row, p, o, rq, ws) == "");
      }
      // Bits past V in the last word, and words past ceil(V / 32), are ignored.
      ref::engine_request ones;
      ones.bitmask.assign(words + 2, 0xFFFFFFFFu);
      CHECK(engine_cases::survivors(row, p, o, ones).size() == V);
      ones.bitmask.resize(words);
      CHECK(engine_cases::survivors(row, p, o, ones).size() == V);
      CHECK(check(row, p, o, ones, ws) == "");
      // All zero: nothing is allowed.
      ref::engine_request zero;
      zero.bitmask.assign(words, 0u);
      auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, zero);
      CHECK(lib.dist_status == ref::engine_status::no_candidates);
      CHECK(lib.dist.ids.empty());
      CHECK(lib.result.st == ref::engine_status::no_candidates);
      CHECK(lib.result.token == -1);
      CHECK(lib.result.logprob == 0.0f);
      // Only tokens whose logit is NaN or -inf allowed: nothing left either.
      if (V >= 2) {
        auto holes = row;
        holes[0] = -INFINITY;
        holes[V - 1] = NAN;
        ref::engine_request rq;
        rq.bitmask.assign(words, 0u);
        rq.bitmask[0] |= 1u;
        rq.bitmask[(V - 1) / 32] |= 1u << ((V - 1) % 32);
        auto l = engine_cases::run_library(s, std::span<const float>(holes), ws, rq);
        CHECK(l.result.st == ref::engine_status::no_candidates);
        CHECK(l.dist.ids.empty());
      }
      // A random mask, against the reference.
      ref::engine_request rnd;
      rnd.bitmask.resize(words);
      for (auto& w : rnd.bitmask) w = static_cast<std::uint32_t>(g.next() & g.next());
      CHECK(check(row, p, o, rnd, ws) == "");
    }
  }
}

TEST_CASE("engine processors: ids outside [0, V) and short bitmasks are invalid_input",
          "[engine][processors][invalid]") {
  for (std::size_t V : {std::size_t{7}, std::size_t{33}, std::size_t{1000}}) {
    ref::rng g(V);
    auto row = ref::uniform_row(V, g);
    const auto out = static_cast<std::int32_t>(V);
    for (auto o : ref::all_engine_orders) {
      INFO("V=" << V << " " << ref::to_string(o));
      ref::engine_params base = plain();
      base.repetition_penalty = 1.2f;
      if (o != ref::engine_order::hf) base.presence_penalty = 0.5f;
      base.logprobs = 4;
      auto expect_invalid = [&](const ref::engine_params& p, const ref::engine_request& rq,
                                const char* what) {
        INFO(what);
        nc::workspace ws;
        nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
        auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, rq);
        CHECK(lib.dist_status == ref::engine_status::invalid_input);
        CHECK(lib.dist.ids.empty());
        CHECK(lib.result.st == ref::engine_status::invalid_input);
        CHECK(lib.result.token == -1);
      };
      auto valid = [&](const ref::engine_params& p, const ref::engine_request& rq, const char* what) {
        INFO(what);
        nc::workspace ws;
        CHECK(check(row, p, o, rq, ws) == "");
      };
      {
        ref::engine_request rq{{0, out}, {1}, {}, 0};
        expect_invalid(base, rq, "prompt id V");
        rq.prompt = {0, -1};
        expect_invalid(base, rq, "prompt id -1");
        rq.prompt = {0, out - 1};
        valid(base, rq, "prompt id V-1");
      }
      {
        ref::engine_request rq{{0}, {1, out}, {}, 0};
        expect_invalid(base, rq, "output id V");
        rq.output = {-7};
        expect_invalid(base, rq, "output id -7");
      }
      {
        ref::engine_params p = base;
        p.logit_bias = {{1, 1.0f}, {out, 1.0f}};
        expect_invalid(p, {}, "logit_bias token V");
        p.logit_bias = {{out - 1, 1.0f}};
        valid(p, {}, "logit_bias token V-1");
      }
      {
        ref::engine_params p = base;
        p.allowed_token_ids = {2, out};
        expect_invalid(p, {}, "allowed id V");
      }
      {
        ref::engine_params p = base;
        p.banned_token_ids = {out + 100};
        expect_invalid(p, {}, "banned id V+100");
      }
      {
        ref::engine_params p = base;
        p.eos_token_ids = {out};
        p.min_tokens = 2;
        expect_invalid(p, {}, "eos id V while min_tokens > 0");
        ref::engine_request long_output{{}, {0, 1, 2}, {}, 0};
        expect_invalid(p, long_output, "eos id V, min_tokens > 0 but already met");
        p.min_tokens = 0;
        valid(p, {}, "eos id V, min_tokens 0: not looked at");
      }
      {
        ref::engine_request rq;
        rq.bitmask.assign(ref::bitmask_words(V) - 1, 0xFFFFFFFFu);  // V = 7: no words, i.e. no mask
        if (!rq.bitmask.empty()) expect_invalid(base, rq, "bitmask one word short");
        rq.bitmask.assign(ref::bitmask_words(V), 0xFFFFFFFFu);
        valid(base, rq, "bitmask of exactly ceil(V/32) words");
      }
    }
  }
}

TEST_CASE("engine processors: history ids are validated only where an active penalty reads them",
          "[engine][processors][invalid]") {
  std::vector<float> row = {1.0f, 2.0f, 3.0f};
  auto status_of = [&](const ref::engine_params& p, ref::engine_order o, const ref::engine_request& rq) {
    nc::workspace ws;
    nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
    return engine_cases::run_library(s, std::span<const float>(row), ws, rq).result.st;
  };
  const ref::engine_request bad_prompt{{0, 3}, {1}, {}, 0}, bad_output{{0}, {1, 5}, {}, 0};
  for (auto o : ref::all_engine_orders) {
    INFO(ref::to_string(o));
    ref::engine_params none;
    none.penalty_last_n = -1;
    CHECK(status_of(none, o, bad_prompt) == ref::engine_status::ok);
    CHECK(status_of(none, o, bad_output) == ref::engine_status::ok);
    ref::engine_params rep = none;
    rep.repetition_penalty = 1.5f;
    CHECK(status_of(rep, o, bad_prompt) == ref::engine_status::invalid_input);
    CHECK(status_of(rep, o, bad_output) == ref::engine_status::invalid_input);
    if (o == ref::engine_order::hf) continue;
    ref::engine_params pres = none;
    pres.presence_penalty = 0.5f;
    // presence counts output only, except llama_cpp's window, which here holds the whole prompt too.
    CHECK(status_of(pres, o, bad_prompt) ==
          (o == ref::engine_order::llama_cpp ? ref::engine_status::invalid_input : ref::engine_status::ok));
    CHECK(status_of(pres, o, bad_output) == ref::engine_status::invalid_input);
  }
  // llama_cpp reads only its window: an id before it is not looked at.
  ref::engine_params p;
  p.repetition_penalty = 1.5f;
  p.penalty_last_n = 2;
  const ref::engine_request old_bad{{7, 0, 1}, {2}, {}, 0}, recent_bad{{0, 1}, {9}, {}, 0};
  CHECK(status_of(p, ref::engine_order::llama_cpp, old_bad) == ref::engine_status::ok);
  CHECK(status_of(p, ref::engine_order::llama_cpp, recent_bad) == ref::engine_status::invalid_input);
  p.penalty_last_n = 0;
  CHECK(status_of(p, ref::engine_order::llama_cpp, recent_bad) == ref::engine_status::ok);
  // And the reference agrees on all of it.
  for (auto o : ref::all_engine_orders) {
    nc::workspace ws;
    CHECK(check(row, p, o, old_bad, ws) == "");
    CHECK(check(row, p, o, recent_bad, ws) == "");
  }
}

TEST_CASE("engine processors: bias and penalties clamp to ±FLT_MAX and never touch infinities",
          "[engine][processors]") {
  constexpr float big = std::numeric_limits<float>::max();
  SECTION("a finite logit pushed past float's range stays a (finite) candidate") {
    const std::vector<float> row = {3e38f, 3.4e38f, 1.0f, -3e38f};
    ref::engine_params p;
    p.repetition_penalty = 0.5f;  // 3e38 / 0.5 and 3.4e38 / 0.5 overflow
    p.logprobs = 4;
    ref::engine_request rq{{0, 1}, {}, {}, 0};
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      CHECK(ref::apply_processors(row, p, o, rq) == std::vector<float>{big, big, 1.0f, -3e38f});
      CHECK(engine_cases::survivors(row, p, o, rq) == std::vector<std::int32_t>{0, 1, 2, 3});
      nc::workspace ws;
      CHECK(check(row, p, o, rq, ws) == "");
    }
    ref::engine_params b;
    b.logit_bias = {{0, 1e38f}, {3, -1e38f}};
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      CHECK(ref::apply_processors(row, b, o, {}) == std::vector<float>{big, 3.4e38f, 1.0f, -big});
      CHECK(engine_cases::survivors(row, b, o) == std::vector<std::int32_t>{0, 1, 2, 3});
      nc::workspace ws;
      CHECK(check(row, b, o, {}, ws) == "");
    }
    ref::engine_params f;
    f.frequency_penalty = 2e38f;
    ref::engine_request twice{{}, {3, 3}, {}, 0};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::llama_cpp}) {
      INFO(ref::to_string(o));
      CHECK(ref::apply_processors(row, f, o, twice)[3] == -big);
      CHECK(engine_cases::survivors(row, f, o, twice) == std::vector<std::int32_t>{0, 1, 2, 3});
    }
  }
  SECTION("+inf stays forced, -inf stays banned") {
    const std::vector<float> row = {INFINITY, 2.0f, -INFINITY, INFINITY};
    ref::engine_params p;
    p.logit_bias = {{0, -1e30f}, {2, 1e30f}};
    p.repetition_penalty = 3.0f;
    p.presence_penalty = 5.0f;
    ref::engine_request rq{{0, 2, 3}, {0, 3}, {}, 0};
    for (auto o : {ref::engine_order::nucleus, ref::engine_order::vllm, ref::engine_order::llama_cpp}) {
      INFO(ref::to_string(o));
      CHECK(engine_cases::survivors(row, p, o, rq) == std::vector<std::int32_t>{0, 3});
      nc::workspace ws;
      CHECK(check(row, p, o, rq, ws) == "");
    }
  }
}

TEST_CASE("engine processors: an empty row is empty_row", "[engine][processors]") {
  std::vector<float> row;
  for (auto o : ref::all_engine_orders) {
    nc::workspace ws;
    nc::sampler s(engine_cases::to_nc(plain()), engine_cases::to_nc(o));
    auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, {});
    CHECK(lib.result.st == ref::engine_status::empty_row);
    CHECK(lib.result.token == -1);
    CHECK(lib.dist.ids.empty());
  }
}
