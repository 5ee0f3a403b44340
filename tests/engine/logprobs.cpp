// row_result's logprob, rank and top-n list in both logprobs modes: hand cases, then a sweep against the
// engine reference (values within logprob_tol, ranks and lists exact).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "engine/engine_cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using engine_cases::check;
using engine_cases::error_log;

namespace {

struct lib_sample {
  nc::row_result r;
  std::vector<nc::token_logprob> top;
};

lib_sample sample(const std::vector<float>& row, const ref::engine_params& p, ref::engine_order o,
                  const ref::engine_request& rq = {}) {
  nc::workspace ws;
  nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
  lib_sample out;
  out.top.resize(64);
  out.r = s.sample(std::span<const float>(row), ws, engine_cases::view(rq),
                   std::span<nc::token_logprob>(out.top));
  out.top.resize(static_cast<std::size_t>(out.r.top_count));
  return out;
}

double log_softmax_at(const std::vector<double>& x, std::size_t i) {
  double m = *std::max_element(x.begin(), x.end()), z = 0.0;
  for (double v : x) z += std::exp(v - m);
  return x[i] - m - std::log(z);
}

}  // namespace

TEST_CASE("engine logprobs: raw describes the row as given", "[engine][logprobs]") {
  // Token 2 is forced by a bias and greedy; raw logprob and rank are those of the input row.
  const std::vector<float> row = {5.0f, 0.0f, 0.0f, 4.0f};
  ref::engine_params p;
  p.temperature = 0.0f;
  p.logit_bias = {{2, 20.0f}};
  p.logprobs = 3;
  const std::vector<double> x = {5, 0, 0, 4};
  for (auto o : ref::all_engine_orders) {
    INFO(ref::to_string(o));
    auto s = sample(row, p, o);
    REQUIRE(s.r.status == nc::status::ok);
    CHECK(s.r.token == 2);
    CHECK(s.r.logprob == Approx(log_softmax_at(x, 2)).margin(1e-5));
    CHECK(s.r.rank == 3);  // 5 and 4 are strictly larger; token 1 ties and does not count
    REQUIRE(s.r.top_count == 3);
    CHECK(s.top[0].token == 0);
    CHECK(s.top[1].token == 3);
    CHECK(s.top[2].token == 1);  // the tie between 1 and 2 goes to the lower id
    CHECK(s.top[0].logprob == Approx(log_softmax_at(x, 0)).margin(1e-5));
    CHECK(s.top[1].logprob == Approx(log_softmax_at(x, 3)).margin(1e-5));
    CHECK(s.top[2].logprob == Approx(log_softmax_at(x, 1)).margin(1e-5));
  }
}

TEST_CASE("engine logprobs: processed describes the renormalized survivors", "[engine][logprobs]") {
  const std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SECTION("top-k 2: two survivors, .625 and .375; the rest are not listed") {
    ref::engine_params p;
    p.top_k = 2;
    p.logprobs = 4;
    p.mode = ref::logprob_mode::processed;
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      for (std::uint64_t pos = 0; pos < 16; ++pos) {
        auto s = sample(row, p, o, {{}, {}, {}, pos});
        REQUIRE(s.r.status == nc::status::ok);
        REQUIRE((s.r.token == 0 || s.r.token == 1));
        CHECK(s.r.logprob == Approx(std::log(s.r.token == 0 ? 0.625 : 0.375)).margin(1e-5));
        CHECK(s.r.rank == 1 + s.r.token);
        REQUIRE(s.r.top_count == 2);
        CHECK(s.top[0].token == 0);
        CHECK(s.top[1].token == 1);
        CHECK(s.top[0].logprob == Approx(std::log(0.625)).margin(1e-5));
        CHECK(s.top[1].logprob == Approx(std::log(0.375)).margin(1e-5));
      }
    }
  }
  SECTION("temperature: processed logprobs are at the request's temperature") {
    ref::engine_params p;
    p.temperature = 0.5f;
    p.logprobs = 1;
    p.mode = ref::logprob_mode::processed;
    // At T = .5 the weights are p^2: .25 .09 .0225 .0025, total .365.
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      auto s = sample(row, p, o);
      REQUIRE(s.r.top_count == 1);
      CHECK(s.top[0].token == 0);
      CHECK(s.top[0].logprob == Approx(std::log(0.25 / 0.365)).margin(1e-5));
    }
  }
  SECTION("greedy rows are {argmax: 0}") {
    ref::engine_params p;
    p.temperature = 0.0f;
    p.logprobs = 4;
    p.mode = ref::logprob_mode::processed;
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      auto s = sample(row, p, o);
      CHECK(s.r.token == 0);
      CHECK(s.r.logprob == 0.0f);
      CHECK(s.r.rank == 1);
      REQUIRE(s.r.top_count == 1);
      CHECK(s.top[0].token == 0);
      CHECK(s.top[0].logprob == 0.0f);
    }
  }
}

TEST_CASE("engine logprobs: tied logits share a rank", "[engine][logprobs]") {
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, 3.0f, 2.0f};
  for (auto mode : {ref::logprob_mode::raw, ref::logprob_mode::processed}) {
    ref::engine_params p;
    p.top_k = 3;
    p.logprobs = 0;
    p.mode = mode;
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      for (std::uint64_t pos = 0; pos < 20; ++pos) {
        auto s = sample(row, p, o, {{}, {}, {}, pos});
        REQUIRE((s.r.token >= 1 && s.r.token <= 3));
        CHECK(s.r.rank == 1);
      }
    }
  }
}

TEST_CASE("engine logprobs: logprobs = 0 writes no list but still reports logprob and rank",
          "[engine][logprobs]") {
  const std::vector<float> row = {0.0f, 2.0f, 1.0f};
  ref::engine_params p;
  p.temperature = 0.0f;
  p.banned_token_ids = {1};
  p.logprobs = 0;
  for (auto o : ref::all_engine_orders) {
    INFO(ref::to_string(o));
    auto s = sample(row, p, o);
    CHECK(s.r.token == 2);
    CHECK(s.r.top_count == 0);
    CHECK(s.r.rank == 2);
    CHECK(s.r.logprob == Approx(log_softmax_at({0, 2, 1}, 2)).margin(1e-5));
  }
}

TEST_CASE("engine logprobs: logprobs = -1 gives the draw's own processed logprob and rank 0",
          "[engine][logprobs]") {
  const std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  for (auto mode : {ref::logprob_mode::raw, ref::logprob_mode::processed}) {
    ref::engine_params p;
    p.logprobs = -1;
    p.top_k = 2;
    p.mode = mode;
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      for (std::uint64_t pos = 0; pos < 8; ++pos) {
        auto s = sample(row, p, o, {{}, {}, {}, pos});
        REQUIRE((s.r.token == 0 || s.r.token == 1));
        CHECK(s.r.logprob == Approx(std::log(s.r.token == 0 ? 0.625 : 0.375)).margin(1e-5));
        CHECK(s.r.rank == 0);
        CHECK(s.r.top_count == 0);
      }
    }
  }
}

TEST_CASE("engine logprobs: sweep of both modes against the reference", "[engine][logprobs]") {
  error_log log;
  nc::workspace ws;
  ref::rng g(0x106);
  for (int rep = 0; rep < 400; ++rep) {
    std::size_t V = rep % 50 == 0 ? 151936 : rep % 7 == 0 ? 1000 + g.below(5000) : 1 + g.below(100);
    auto kind = ref::candidate_row_kinds[g.below(std::size(ref::candidate_row_kinds))];
    if (V > 100000) kind = ref::row_kind::peaky;
    auto row = ref::make_row(kind, V, g);
    auto o = ref::all_engine_orders[g.below(4)];
    auto p = engine_cases::random_params(V, o, g);
    p.logprobs = static_cast<int>(g.below(66)) - 1;
    p.mode = rep % 2 ? ref::logprob_mode::raw : ref::logprob_mode::processed;
    auto rq = engine_cases::random_request(V, g);
    if (g.below(2)) rq.bitmask.clear();
    std::string e = check(row, p, o, rq, ws);
    log.add(engine_cases::tagged(ref::to_string(kind), e));
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 350);
}

TEST_CASE("engine logprobs: processed_logprobs_of replays the draw's distribution", "[engine][logprobs]") {
  // The drawn token's replayed logprob is sample()'s processed logprob bit for bit; every other id's
  // is the log of its probability in process()'s distribution (-inf outside it).
  nc::workspace ws, ws2;
  ref::rng g(0x2e91a7);
  std::size_t checked = 0, kept = 0, dropped = 0;
  for (int rep = 0; rep < 300; ++rep) {
    const std::size_t V = rep % 60 == 0 ? 32000 : 1 + g.below(3000);
    const auto row =
        ref::make_row(ref::candidate_row_kinds[g.below(std::size(ref::candidate_row_kinds))], V, g);
    const auto o = ref::all_engine_orders[g.below(4)];
    auto p = engine_cases::to_nc(engine_cases::random_params(V, o, g));
    p.logprobs = 0;
    p.logprobs_mode = nc::logprob_mode::processed;
    const nc::sampler s(p, engine_cases::to_nc(o));
    auto rq = engine_cases::random_request(V, g);
    float mu = 2.0f * p.mirostat_tau, mu2 = mu;
    nc::row_request req = engine_cases::view(rq);
    req.mirostat_mu = &mu;
    const nc::row_result r = s.sample(std::span<const float>(row), ws, req);
    std::vector<std::int32_t> ids(8);
    for (auto& id : ids) id = static_cast<std::int32_t>(g.below(V));
    if (r.status == nc::status::ok) ids[0] = r.token;
    std::vector<float> out(ids.size());
    req.mirostat_mu = &mu2;
    const nc::distribution d = s.processed_logprobs_of(std::span<const float>(row), ws2, req, ids, out);
    INFO("rep " << rep << " order " << ref::to_string(o) << " V " << V);
    REQUIRE(d.status() == r.status);
    if (r.status != nc::status::ok) {
      for (float v : out) CHECK(v == -std::numeric_limits<float>::infinity());
      continue;
    }
    CHECK(std::bit_cast<std::uint32_t>(out[0]) == std::bit_cast<std::uint32_t>(r.logprob));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto it = std::find(d.ids().begin(), d.ids().end(), ids[i]);
      const float prob =
          it == d.ids().end() ? 0.0f : d.probs()[static_cast<std::size_t>(it - d.ids().begin())];
      if (prob > 0.0f) {
        ++kept;
        CHECK(std::exp(double(out[i])) == Approx(prob).epsilon(1e-5).margin(1e-30));
      } else {
        ++dropped;
        CHECK(out[i] == -std::numeric_limits<float>::infinity());
      }
    }
    ++checked;
  }
  CHECK(checked >= 250);
  CHECK(kept >= 300);
  CHECK(dropped >= 200);
}
