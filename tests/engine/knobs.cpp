// The knob table (engine/knobs.hpp) walked row by row: each field's bad values are refused naming it;
// every engine order either acts on it or refuses it; a sharded row honours it or gathers. The server's
// JSON round trip is in tests/server/units.cpp; the Python keywords in python/tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/engine/knobs.hpp"
#include "nucleus/engine/sampler.hpp"
#include "nucleus/sharded/split.hpp"

namespace nc = nucleus;

namespace {

constexpr std::size_t vocab = 64;

// A row where every knob's probe visibly acts: a geometric spread (p0 ~ 0.3, the tail well under
// epsilon), ids shuffled so that id order is not rank order.
std::vector<float> test_row() {
  std::vector<float> row(vocab);
  for (std::size_t i = 0; i < vocab; ++i) row[(i * 37 + 11) % vocab] = 6.0f - 0.35f * static_cast<float>(i);
  return row;
}
constexpr std::int32_t top_id = 11;  // rank 0
constexpr std::int32_t second_id = 48;

// A history with repeats (penalties), a repeated bigram (no-repeat n-gram) and a repeated run whose
// continuation is the top token (DRY: 5 6 7 top ... 5 6 7 -> top).
const std::vector<std::int32_t> prompt = {3, 9, second_id, 5, 6, 7, top_id, 20, 21, second_id, 9};
const std::vector<std::int32_t> output = {second_id, 33, 5, 6, 7};

// The knob set at its probe (lists get a value that acts), with the knob it modifies switched on.
nc::sampling_params probe_params(const nc::knob& k) {
  nc::sampling_params p;
  p.eos_token_ids = {top_id};  // the model's: min_tokens bans it
  if (k.modifies) {
    const nc::knob* m = nc::find_knob(k.modifies);
    REQUIRE(m != nullptr);
    m->set(p, m->probe);
  }
  const std::string name = k.name;
  if (k.number()) {
    k.set(p, k.probe);
  } else if (name == "dry_sequence_breakers") {
    p.dry_sequence_breakers = {{6}};
  } else if (name == "logit_bias") {
    p.logit_bias = {{top_id, -3.0f}};
  } else if (name == "allowed_token_ids") {
    p.allowed_token_ids = {top_id, second_id, 2, 3};
  } else if (name == "banned_token_ids") {
    p.banned_token_ids = {second_id};
  } else if (name == "eos_token_ids") {
    p.eos_token_ids = {second_id};
  }
  return p;
}

// What a request observes of a sampler: the processed distribution, eight draws with their logprobs,
// and mirostat's mu after them.
std::vector<double> observe(const nc::sampler& s) {
  const std::vector<float> row = test_row();
  nc::workspace ws;
  std::vector<double> seen;
  float mu = 2.0f * s.params().mirostat_tau;
  nc::row_request rq{prompt, output, {}, 0, &mu, 0};
  const nc::distribution d = s.process(std::span<const float>(row), ws, rq);
  for (std::size_t i = 0; i < d.size(); ++i) {
    seen.push_back(d.ids().data() ? d.ids()[i] : static_cast<double>(i));
    seen.push_back(d.probs()[i]);
  }
  for (std::uint64_t pos = 0; pos < 8; ++pos) {
    rq.position = pos;
    const nc::row_result r = s.sample(std::span<const float>(row), ws, rq);
    seen.push_back(r.token);
    seen.push_back(r.logprob);
  }
  seen.push_back(mu);
  return seen;
}

nc::sampling_params base_of(const nc::knob& k) {
  nc::sampling_params p;
  p.eos_token_ids = {top_id};
  if (std::string(k.name) == "eos_token_ids") p.min_tokens = 5;
  if (k.modifies) {
    const nc::knob* m = nc::find_knob(k.modifies);
    m->set(p, m->probe);
  }
  return p;
}

}  // namespace

TEST_CASE("knob table: every row is complete", "[engine][knobs]") {
  for (const nc::knob& k : nc::knobs) {
    INFO(k.name);
    CHECK(std::string(k.name).find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
    CHECK(nc::find_knob(k.name) == &k);  // names are unique
    if (k.number()) {
      CHECK((k.real != nullptr) != (k.integer != nullptr));
      CHECK(k.in_range(k.get(nc::sampling_params{})));  // the default is valid
      CHECK(std::string(k.rule).rfind("must ", 0) == 0);
      if (k.kind != nc::knob_kind::logprobs) CHECK(k.in_range(k.probe));
    }
    if (k.on) CHECK_FALSE(k.on(nc::sampling_params{}));  // off at its default
    if (k.modifies) CHECK(nc::find_knob(k.modifies) != nullptr);
  }
}

TEST_CASE("knob table: a value out of each number's range is refused, naming the field", "[engine][knobs]") {
  std::size_t checked = 0;
  for (const nc::knob& k : nc::knobs) {
    if (!k.number()) continue;
    std::vector<double> bad;
    if (k.kind == nc::knob_kind::real) {
      bad.push_back(std::numeric_limits<double>::quiet_NaN());
      bad.push_back(std::numeric_limits<double>::infinity());
      bad.push_back(-std::numeric_limits<double>::infinity());
    }
    const double step = k.kind == nc::knob_kind::real ? 1e-3 : 1.0;
    if (std::isfinite(k.lo) && k.lo > std::numeric_limits<int>::min())
      bad.push_back(k.lo_open ? k.lo : k.lo - step);
    if (std::isfinite(k.hi) && k.hi < std::numeric_limits<int>::max())
      bad.push_back(k.hi_open ? k.hi : k.hi + step);
    for (double v : bad) {
      INFO(k.name << " = " << v);
      REQUIRE_FALSE(k.in_range(v));
      nc::sampling_params p;
      k.set(p, v);
      for (const nc::detail::engine_order_info& info : nc::detail::engine_orders) {
        const nc::engine_order o = info.order;
        try {
          nc::sampler s(p, o);
          FAIL("accepted");
        } catch (const std::invalid_argument& e) {
          CHECK_THAT(e.what(), Catch::Matchers::Contains(std::string("sampling_params.") + k.name + ":"));
          ++checked;
        }
      }
    }
  }
  CHECK(checked >= 336);
}

TEST_CASE("knob table: every engine order acts on each knob or refuses it", "[engine][knobs]") {
  std::size_t acted = 0, refused = 0;
  for (const nc::knob& k : nc::knobs) {
    if (k.shard == nc::shard_rule::none) continue;  // seed and logprobs: not the distribution
    for (const nc::detail::engine_order_info& info : nc::detail::engine_orders) {
      const nc::engine_order o = info.order;
      INFO(k.name << " in the " << nc::detail::order_info(o).name << " order");
      const nc::sampling_params on = probe_params(k);
      const nc::sampling_params off = base_of(k);
      if (!k.in_order(o)) {
        if (!k.on || !k.on(on)) continue;  // a modifier the order ignores (knobs.hpp)
        try {
          nc::sampler s(on, o);
          FAIL("accepted by an order without it");
        } catch (const std::invalid_argument& e) {
          CHECK_THAT(e.what(), Catch::Matchers::Contains(std::string("sampling_params.") + k.name + ":"));
          ++refused;
        }
        continue;
      }
      if (k.modifies && !nc::find_knob(k.modifies)->in_order(o)) continue;
      CHECK(observe(nc::sampler(on, o)) != observe(nc::sampler(off, o)));
      ++acted;
    }
  }
  CHECK(acted >= 85);
  CHECK(refused >= 20);
}

TEST_CASE("knob table: a sharded row honours each knob or gathers", "[engine][knobs][sharded]") {
  const std::vector<float> row = test_row();
  const std::size_t cuts[] = {0, 7, 40, vocab};
  std::size_t fast = 0, gathered = 0;
  for (const nc::knob& k : nc::knobs) {
    if (k.shard == nc::shard_rule::none) continue;
    for (const nc::detail::engine_order_info& info : nc::detail::engine_orders) {
      const nc::engine_order o = info.order;
      if (!k.in_order(o) || (k.modifies && !nc::find_knob(k.modifies)->in_order(o))) continue;
      INFO(k.name << " in the " << nc::detail::order_info(o).name << " order");
      nc::sampling_params p = probe_params(k);
      p.logprobs = 4;
      const nc::sampler s(p, o);
      nc::split_sampler split(s, 3);
      nc::workspace ws;
      for (std::uint64_t pos = 0; pos < 8; ++pos) {
        float mu_whole = 2.0f * p.mirostat_tau, mu_split = mu_whole;
        nc::token_logprob top_whole[4], top_split[4];
        const nc::row_result whole =
            s.sample(std::span<const float>(row), ws, {prompt, output, {}, pos, &mu_whole, 0}, top_whole);
        const nc::row_result parts = split.sample(std::span<const float>(row), cuts,
                                                  {prompt, output, {}, pos, &mu_split, 0}, top_split);
        CHECK(parts == whole);
        CHECK(mu_split == mu_whole);
        for (std::uint32_t i = 0; i < whole.top_count; ++i) {
          CHECK(top_split[i].token == top_whole[i].token);
          CHECK(top_split[i].logprob == top_whole[i].logprob);
        }
      }
      const bool gathers = k.shard == nc::shard_rule::gather;
      CHECK((split.route() == nc::shard_sampler::path::gather) == gathers);
      (gathers ? gathered : fast)++;
    }
  }
  CHECK(fast >= 59);
  CHECK(gathered >= 26);
}
