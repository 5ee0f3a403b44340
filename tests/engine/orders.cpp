// The four engine orders: inputs on which they keep different survivors, each against its reference
// and against the hand-derived set; greedy rules; presets.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/engine_cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using engine_cases::check;
using engine_cases::error_log;
using engine_cases::ref_survivors;
using engine_cases::survivors;
using ids = std::vector<std::int32_t>;

namespace {

constexpr ref::engine_order nucleus_o = ref::engine_order::nucleus, vllm_o = ref::engine_order::vllm,
                            hf_o = ref::engine_order::hf, llama_o = ref::engine_order::llama_cpp;

// Logits whose softmax is `probs`.
std::vector<float> logits_of(std::initializer_list<double> probs) {
  std::vector<float> row;
  for (double p : probs) row.push_back(static_cast<float>(std::log(p)));
  return row;
}

// For each order: the hand-derived survivors, which the reference and the library must both give; then
// the full check (probabilities, draw, logprobs) against the reference.
void expect_sets(const std::vector<float>& row, ref::engine_params p, const ids& nucleus_set,
                 const ids& vllm_set, const ids& hf_set, const ids& llama_set) {
  const std::pair<ref::engine_order, const ids*> want[] = {
      {nucleus_o, &nucleus_set}, {vllm_o, &vllm_set}, {hf_o, &hf_set}, {llama_o, &llama_set}};
  p.logprobs = 8;
  for (auto [o, set] : want) {
    INFO(ref::to_string(o));
    CHECK(ref_survivors(row, p, o) == *set);
    CHECK(survivors(row, p, o) == *set);
    error_log log;
    for (auto mode : {ref::logprob_mode::raw, ref::logprob_mode::processed}) {
      p.mode = mode;
      for (std::uint64_t pos = 0; pos < 8; ++pos) {
        nc::workspace ws;
        log.add(check(row, p, o, ref::engine_request{{}, {}, {}, pos}, ws));
      }
    }
    INFO(log.summary());
    CHECK(log.count == 0);
    CHECK(log.checked >= 16);
  }
}

}  // namespace

TEST_CASE("engine orders: top-k ties (vllm, hf keep them; nucleus, llama_cpp cut at exactly k)",
          "[engine][orders]") {
  const std::vector<float> row = {5.0f, 4.0f, 3.0f, 3.0f, 3.0f, 1.0f, 0.0f, -1.0f};
  ref::engine_params p;
  p.top_k = 3;
  expect_sets(row, p, {0, 1, 2}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2});
  // The tie at the boundary, out of id order.
  const std::vector<float> shuffled = {3.0f, -1.0f, 5.0f, 3.0f, 1.0f, 4.0f, 3.0f, 0.0f};
  expect_sets(shuffled, p, {0, 2, 5}, {0, 2, 3, 5, 6}, {0, 2, 3, 5, 6}, {0, 2, 5});
  // k inside a run of ties that starts at the top.
  const std::vector<float> flat = {2.0f, 2.0f, 2.0f, 2.0f, 1.0f};
  p.top_k = 2;
  expect_sets(flat, p, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1});
}

TEST_CASE("engine orders: vllm's min-p before top-p keeps fewer than min-p after", "[engine][orders]") {
  // p = .4 .3 .2 .05 .05; min_p .2 drops the .05s (threshold .08). After it (nucleus, hf, llama_cpp at T = 1)
  // top-p .75 sees .7 before token 2 and keeps it; vllm renormalizes first (.444 .333 .222): .778 before
  // token 2, cut.
  const auto row = logits_of({0.4, 0.3, 0.2, 0.05, 0.05});
  ref::engine_params p;
  p.top_p = 0.75f;
  p.min_p = 0.2f;
  expect_sets(row, p, {0, 1, 2}, {0, 1}, {0, 1, 2}, {0, 1, 2});
}

TEST_CASE("engine orders: llama_cpp's top-p and min-p see T = 1", "[engine][orders]") {
  const auto row = logits_of({0.4, 0.35, 0.25});
  SECTION("top-p") {
    // T = 1: .4 before token 1 < .45, kept. T = .5 (.464 .355 .181): .464 before token 1, cut.
    ref::engine_params p;
    p.temperature = 0.5f;
    p.top_p = 0.45f;
    expect_sets(row, p, {0}, {0}, {0}, {0, 1});
  }
  SECTION("min-p") {
    // T = 1: .25 / .4 = .625 >= .5, kept. T = .5: .625^2 = .39 < .5, cut.
    ref::engine_params p;
    p.temperature = 0.5f;
    p.min_p = 0.5f;
    expect_sets(row, p, {0, 1}, {0, 1}, {0, 1}, {0, 1, 2});
  }
  SECTION("temperature above 1 widens the others' sets instead") {
    // min-p .9: at T = 2 token 1 has sqrt(.875) = .935 of the max, kept; at T = 1 (llama_cpp) .875, cut.
    ref::engine_params p;
    p.temperature = 2.0f;
    p.min_p = 0.9f;
    expect_sets(row, p, {0, 1}, {0, 1}, {0, 1}, {0});
  }
}

TEST_CASE("engine orders: greedy rules", "[engine][orders][greedy]") {
  ref::rng g(0x63);
  SECTION("T = 0 is greedy in every order: {argmax: 1}") {
    for (std::size_t V : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      auto row = ref::uniform_row(V, g);
      const auto top = ref::argmax(row);
      ref::engine_params p;
      p.temperature = 0.0f;
      p.top_k = 5;
      p.top_p = 0.3f;
      p.min_p = 0.2f;
      for (auto o : ref::all_engine_orders) {
        INFO(ref::to_string(o) << " V=" << V);
        nc::workspace ws;
        nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
        for (std::uint64_t pos = 0; pos < 5; ++pos) {
          auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, {{}, {}, {}, pos});
          CHECK(lib.dist.ids == ids{top});
          CHECK(lib.dist.probs == std::vector<float>{1.0f});
          CHECK(lib.result.token == top);
        }
      }
    }
  }
  SECTION("vllm is greedy below T = 1e-5, the others are not") {
    for (std::size_t V : {std::size_t{7}, std::size_t{1000}}) {
      auto row = ref::uniform_row(V, g);
      const auto top = ref::argmax(row);
      ref::engine_params p;
      p.temperature = 5e-6f;
      CHECK(survivors(row, p, vllm_o) == ids{top});
      for (auto o : {nucleus_o, hf_o, llama_o}) CHECK(survivors(row, p, o).size() == V);
      p.temperature = 2e-5f;
      CHECK(survivors(row, p, vllm_o).size() == V);
      for (auto o : ref::all_engine_orders) {
        for (float T : {5e-6f, 2e-5f}) {
          p.temperature = T;
          nc::workspace ws;
          CHECK(check(row, p, o, {}, ws) == "");
        }
      }
    }
  }
  SECTION("a temperature whose 1/T overflows float is greedy in every order") {
    std::vector<float> row = {1.0f, 3.0f, 2.9999998f, -1.0f};
    ref::engine_params p;
    p.temperature = 1e-39f;
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      nc::sampler s(engine_cases::to_nc(p), engine_cases::to_nc(o));
      nc::workspace ws;
      auto lib = engine_cases::run_library(s, std::span<const float>(row), ws, {});
      CHECK(lib.dist.ids == ids{1});
      CHECK(lib.dist.probs == std::vector<float>{1.0f});
      CHECK(check(row, p, o, {}, ws) == "");
    }
  }
  SECTION("greedy ties go to the lowest id, after the processors") {
    std::vector<float> row = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
    ref::engine_params p;
    p.temperature = 0.0f;
    p.banned_token_ids = {1};
    for (auto o : ref::all_engine_orders) {
      INFO(ref::to_string(o));
      CHECK(survivors(row, p, o) == ids{3});
      nc::workspace ws;
      CHECK(check(row, p, o, {}, ws) == "");
    }
  }
  SECTION("llama_cpp: a negative temperature, if accepted, is greedy") {
    std::vector<float> row = {1.0f, 3.0f, 2.0f};
    ref::engine_params p;
    p.temperature = -1.0f;
    bool built = false;
    try {
      nc::sampler s(engine_cases::to_nc(p), nc::engine_order::llama_cpp);
      built = true;
    } catch (const std::invalid_argument&) {
    }
    if (built) {
      CHECK(survivors(row, p, llama_o) == ids{1});
      nc::workspace ws;
      CHECK(check(row, p, llama_o, {}, ws) == "");
    }
  }
}

TEST_CASE("engine orders: random stage parameters on tie-heavy rows, every order", "[engine][orders]") {
  // Logits rounded to a coarse grid make ties at every top-k boundary; the orders' boundary rules differ.
  error_log log;
  std::size_t differed = 0;
  nc::workspace ws;
  ref::rng g(0x7135);
  for (int rep = 0; rep < 120; ++rep) {
    std::size_t V = rep % 3 == 0 ? 1000 : 1 + g.below(64);
    auto row = ref::uniform_row(V, g, -4.0, 4.0);
    for (auto& x : row) x = std::round(x * 2.0f) / 2.0f;  // -0 appears too: it ties with +0
    ref::engine_params p;
    p.temperature = engine_cases::f(g.uniform(0.3, 2.0));
    p.top_k = static_cast<long long>(1 + g.below(std::min<std::size_t>(V, 40)));
    p.top_p = g.below(2) ? 1.0f : engine_cases::f(g.uniform(0.3, 1.0));
    p.min_p = g.below(2) ? 0.0f : engine_cases::f(g.uniform(0.0, 0.4));
    p.logprobs = 5;
    p.mode = g.below(2) ? ref::logprob_mode::raw : ref::logprob_mode::processed;
    std::vector<ids> sets;
    for (auto o : ref::all_engine_orders) {
      ref::engine_request rq{{}, {}, {}, g.below(100)};
      log.add(check(row, p, o, rq, ws));
      sets.push_back(ref_survivors(row, p, o));
    }
    differed += sets[0] != sets[1] || sets[0] != sets[2] || sets[0] != sets[3];
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 400);
  CHECK(differed > 20);  // the sweep does reach inputs where the orders disagree
}

TEST_CASE("engine orders: presets are the sampler with that order", "[engine][orders][presets]") {
  ref::rng g(0x9E5);
  for (int rep = 0; rep < 40; ++rep) {
    std::size_t V = 1 + g.below(3000);
    auto row = ref::peaky_row(V, g);
    for (auto o : ref::all_engine_orders) {
      auto p = engine_cases::random_params(V, o, g);
      auto rq = engine_cases::random_request(V, g);
      nc::sampling_params np = engine_cases::to_nc(p);
      nc::sampler direct(np, engine_cases::to_nc(o));
      auto preset = [&]() {
        switch (o) {
          case nucleus_o:
            return nc::presets::nucleus(np);
          case vllm_o:
            return nc::presets::vllm(np);
          case hf_o:
            return nc::presets::hf(np);
          case llama_o:
            return nc::presets::llama_cpp(np);
        }
        return nc::presets::nucleus(np);
      }();
      nc::workspace ws;
      auto a = engine_cases::run_library(direct, std::span<const float>(row), ws, rq);
      auto b = engine_cases::run_library(preset, std::span<const float>(row), ws, rq);
      INFO(ref::to_string(o));
      CHECK(a.dist.ids == b.dist.ids);
      CHECK(a.dist.probs == b.dist.probs);
      CHECK(a.result.token == b.result.token);
      CHECK(ref::float_bits(a.result.logprob) == ref::float_bits(b.result.logprob));
      CHECK(a.result.rank == b.result.rank);
      CHECK(a.result.top_count == b.result.top_count);
      nc::workspace ws2;
      CHECK(check(row, p, o, rq, ws2) == "");
    }
  }
}

TEST_CASE("engine orders: -0 and +0 are the same logit (ties by id)", "[engine][orders][ties]") {
  // docs/semantics.md: rank order is (logit descending, id ascending), and -0.0f == 0.0f.
  ref::engine_params p;
  p.top_k = 2;
  const std::vector<float> b = {1.0f, -0.0f, 0.0f, 0.0f};
  expect_sets(b, p, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1});
  p.top_k = 1;
  const std::vector<float> c = {-0.0f, 0.0f, -1.0f};
  expect_sets(c, p, {0}, {0, 1}, {0, 1}, {0});
  // Sorted distributions list tied tokens by id, whatever the sign of their zero.
  p.top_k = 3;
  const std::vector<float> d = {0.0f, 2.0f, -0.0f, 0.0f, -0.0f, -1.0f};
  expect_sets(d, p, {0, 1, 2}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 1, 2});
}

namespace {

// The library's processed distribution with p.min_keep, against the engine reference's (razor-close
// cuts following the library's choice). engine_cases::to_nc leaves min_keep at 1, so it is set here.
std::string check_min_keep(const std::vector<float>& row, const ref::engine_params& p, ref::engine_order o,
                           nc::workspace& ws) {
  nc::sampling_params np = engine_cases::to_nc(p);
  np.min_keep = static_cast<int>(p.min_keep);
  const nc::sampler s(np, engine_cases::to_nc(o));
  const ref::engine_request rq;
  const nc::distribution d = s.process(std::span<const float>(row), ws, engine_cases::view(rq));
  const ref::observed got = engine_cases::observe(d);
  std::vector<char> member(row.size(), 0);
  for (auto id : got.ids) member[static_cast<std::size_t>(id)] = 1;
  const ref::engine_outcome want = ref::engine_guided(row, p, o, rq, member);
  const std::string what = ref::describe(p, o) + " V=" + std::to_string(row.size());
  if (engine_cases::to_ref(d.status()) != want.st)
    return what + ": status " + ref::to_string(engine_cases::to_ref(d.status())) + ", reference " +
           ref::to_string(want.st);
  if (want.st != ref::engine_status::ok) return {};
  std::vector<std::pair<std::int32_t, float>> lib;
  for (std::size_t i = 0; i < got.ids.size(); ++i) lib.emplace_back(got.ids[i], got.probs[i]);
  std::sort(lib.begin(), lib.end());
  if (lib.size() != want.dist.entries.size())
    return what + ": " + std::to_string(lib.size()) + " survivors, reference " +
           std::to_string(want.dist.entries.size());
  for (std::size_t i = 0; i < lib.size(); ++i) {
    const ref::entry& e = want.dist.entries[i];
    if (lib[i].first != e.id) return what + ": token " + std::to_string(lib[i].first) + " is no survivor";
    if (!ref::prob_close(lib[i].second, e.prob))
      return what + ": token " + std::to_string(e.id) + " p=" + std::to_string(lib[i].second) +
             ", reference " + std::to_string(e.prob);
  }
  return {};
}

ids min_keep_survivors(const std::vector<float>& row, nc::sampling_params p, nc::engine_order o) {
  nc::workspace ws;
  const nc::distribution d = nc::sampler(p, o).process(std::span<const float>(row), ws, nc::row_request{});
  ids out(d.ids().begin(), d.ids().end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("engine orders: min_keep goes to the stages each engine gives it to",
          "[engine][orders][min_keep]") {
  // p = .5 .2 .15 .1 .05.
  const auto row = logits_of({0.5, 0.2, 0.15, 0.1, 0.05});
  constexpr auto nucleus = nc::engine_order::nucleus, hf = nc::engine_order::hf,
                 llama = nc::engine_order::llama_cpp;
  nc::sampling_params p;
  p.min_keep = 3;
  SECTION("top-k: HF (and nucleus) raise k to min_keep; llama.cpp's top-k takes none") {
    p.top_k = 1;
    CHECK(min_keep_survivors(row, p, nucleus) == ids{0, 1, 2});
    CHECK(min_keep_survivors(row, p, hf) == ids{0, 1, 2});
    CHECK(min_keep_survivors(row, p, llama) == ids{0});
  }
  SECTION("top-p, min-p, typical: every engine that has them") {
    for (auto o : {nucleus, hf, llama}) {
      nc::sampling_params q = p;
      q.top_p = 0.3f;
      CHECK(min_keep_survivors(row, q, o) == ids{0, 1, 2});
      q = p;
      q.min_p = 0.9f;
      CHECK(min_keep_survivors(row, q, o) == ids{0, 1, 2});
      q = p;
      q.typical_p = 0.05f;
      CHECK(min_keep_survivors(row, q, o).size() == 3);
    }
  }
  SECTION("epsilon and eta: HF and nucleus") {
    for (auto o : {nucleus, hf}) {
      nc::sampling_params q = p;
      q.epsilon_cutoff = 0.3f;
      CHECK(min_keep_survivors(row, q, o) == ids{0, 1, 2});
      q = p;
      q.eta_cutoff = 0.6f;  // H = 1.333: the cut is min(.6, sqrt(.6) e^-H = .204), keeping token 0 alone
      CHECK(min_keep_survivors(row, q, o) == ids{0, 1, 2});
    }
  }
  SECTION("xtc: llama.cpp and nucleus skip a removal that would leave fewer than min_keep") {
    for (auto o : {nucleus, llama}) {
      nc::sampling_params q = p;
      q.xtc_probability = 1.0f;
      q.xtc_threshold = 0.12f;  // tokens 0, 1, 2 reach it: the removal leaves 2, 3, 4
      CHECK(min_keep_survivors(row, q, o) == ids{2, 3, 4});
      q.min_keep = 4;
      CHECK(min_keep_survivors(row, q, o) == ids{0, 1, 2, 3, 4});
    }
  }
}

TEST_CASE("engine orders: min_keep with random knobs matches the reference", "[engine][orders][min_keep]") {
  ref::rng g(0x3E1);
  engine_cases::error_log log;
  nc::workspace ws;
  for (std::size_t V : {std::size_t{7}, std::size_t{64}, std::size_t{1000}, std::size_t{32000}}) {
    const int rounds = V >= 32000 ? 4 : 40;
    for (int i = 0; i < rounds; ++i) {
      const auto row =
          ref::make_row(ref::candidate_row_kinds[g.below(std::size(ref::candidate_row_kinds))], V, g);
      for (auto o : {nucleus_o, hf_o, llama_o}) {
        ref::engine_params p = engine_cases::random_params(V, o, g);
        static constexpr long long floors[] = {1, 2, 5, 50, 5000};
        p.min_keep = floors[g.below(std::size(floors))];
        log.add(check_min_keep(row, p, o, ws));
      }
    }
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 300);
}
