// min_keep: a truncating stage keeps at least min_keep candidates (llama.cpp's min_keep, Hugging Face's
// min_tokens_to_keep). top_p, min_p: the first min_keep in rank order; typical: the first min_keep in
// its own order; epsilon_cutoff, eta_cutoff: every logit >= the min_keep-th largest (ties kept);
// xtc: nothing is removed when fewer than min_keep would remain; top_k(k, ties, min_keep): k raised.
#include "stages/new_stage_sweep.hpp"

#include <algorithm>
#include <limits>

namespace nc = nucleus;
namespace ref = nucleus_ref;
using Catch::Matchers::Contains;
using nucleus_cases::check_proc;
using nucleus_cases::error_log;
using nucleus_cases::log_row;
using nucleus_cases::observe;
using nucleus_cases::sorted_ids;
using nucleus_cases::with_kind;
using ids = std::vector<std::int32_t>;

namespace {

constexpr int keeps[] = {2, 7, 64, 5000};  // 5000: more than every small row holds

}  // namespace

TEST_CASE("min_keep: top_p and min_p match the reference, alone, tempered and after top_k",
          "[stages][min_keep][top_p][min_p]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x31E9, [&](const nucleus_cases::sweep_row& r) {
    const std::vector<float> ps = r.big ? std::vector<float>{0.5f} : std::vector<float>{1e-6f, 0.3f, 0.9f};
    const std::vector<float> ms = r.big ? std::vector<float>{0.5f} : std::vector<float>{0.05f, 0.5f, 1.0f};
    for (int k : keeps) {
      const auto kn = static_cast<std::size_t>(k);
      for (float p : ps) {
        const ref::stage alone[] = {ref::top_p(p, kn)};
        log.add(with_kind(r.kind, check_proc(nc::top_p(p, k), r.row, alone, ws)));
        const ref::stage hot[] = {ref::temperature(2.0), ref::top_p(p, kn)};
        log.add(with_kind(r.kind, check_proc(nc::temperature(2.0f) | nc::top_p(p, k), r.row, hot, ws)));
        const ref::stage sorted[] = {ref::top_k(100), ref::top_p(p, kn)};
        log.add(with_kind(r.kind, check_proc(nc::top_k(100) | nc::top_p(p, k), r.row, sorted, ws)));
      }
      for (float m : ms) {
        const ref::stage alone[] = {ref::min_p(m, kn)};
        log.add(with_kind(r.kind, check_proc(nc::min_p(m, k), r.row, alone, ws)));
        const ref::stage cold[] = {ref::temperature(0.5), ref::min_p(m, kn)};
        log.add(with_kind(r.kind, check_proc(nc::temperature(0.5f) | nc::min_p(m, k), r.row, cold, ws)));
        const ref::stage sorted[] = {ref::top_k(100), ref::min_p(m, kn)};
        log.add(with_kind(r.kind, check_proc(nc::top_k(100) | nc::min_p(m, k), r.row, sorted, ws)));
      }
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 500);
}

TEST_CASE("min_keep: typical matches the reference", "[stages][min_keep][typical]") {
  for (int k : keeps)
    nucleus_cases::sweep_stage(
        0x7E2 + static_cast<std::uint64_t>(k), {0.05f, 0.5f, 0.95f}, {0.5f},
        [k](float T, float p, std::span<const float> row, nc::workspace& ws) {
          return (nc::temperature(T) | nc::typical(p, k))(row, ws);
        },
        [k](const ref::state& s, double p) { return ref::typical(s, p, static_cast<std::size_t>(k)); },
        "typical");
}

TEST_CASE("min_keep: xtc matches the reference", "[stages][min_keep][xtc]") {
  for (int k : keeps)
    nucleus_cases::sweep_stage(
        0x87D + static_cast<std::uint64_t>(k), {0.01f, 0.05f, 0.1f}, {0.05f},
        [k](float T, float t, std::span<const float> row, nc::workspace& ws) {
          return (nc::temperature(T) | nc::xtc(1.0f, t, k))(row, ws, nc::draw_key{1, 2});
        },
        [k](const ref::state& s, double t) { return ref::xtc(s, 1.0, t, 0.0, static_cast<std::size_t>(k)); },
        "xtc");
}

TEST_CASE("min_keep: epsilon_cutoff and eta_cutoff match the reference", "[stages][min_keep][epsilon][eta]") {
  for (int k : keeps) {
    nucleus_cases::sweep_stage(
        0xE96 + static_cast<std::uint64_t>(k), {3e-4f, 0.1f, 0.9f}, {0.1f},
        [k](float T, float e, std::span<const float> row, nc::workspace& ws) {
          return (nc::temperature(T) | nc::epsilon_cutoff(e, k))(row, ws);
        },
        [k](const ref::state& s, double e) { return ref::epsilon_cutoff(s, e, static_cast<std::size_t>(k)); },
        "epsilon_cutoff");
    nucleus_cases::sweep_stage(
        0xE7A + static_cast<std::uint64_t>(k), {3e-4f, 0.1f, 0.9f}, {0.1f},
        [k](float T, float e, std::span<const float> row, nc::workspace& ws) {
          return (nc::temperature(T) | nc::eta_cutoff(e, k))(row, ws);
        },
        [k](const ref::state& s, double e) { return ref::eta_cutoff(s, e, static_cast<std::size_t>(k)); },
        "eta_cutoff");
  }
}

TEST_CASE("min_keep: larger than, equal to and below the candidate count, with NaN and -inf",
          "[stages][min_keep]") {
  nc::workspace ws;
  constexpr float nan = ref::nan, ninf = -ref::inf;
  // Four candidates, rank order 5, 0, 2, 4; every stage's own rule keeps token 5 alone.
  const std::vector<float> row = {1.0f, nan, 0.5f, ninf, 0.2f, 30.0f, ninf};
  const ids all = {0, 2, 4, 5};
  for (int k : {4, 5, 1000}) {
    INFO("min_keep " << k);
    CHECK(sorted_ids(observe(nc::top_p(1e-6f, k)(row, ws))) == all);
    CHECK(sorted_ids(observe(nc::min_p(0.5f, k)(row, ws))) == all);
    CHECK(sorted_ids(observe(nc::typical(1e-6f, k)(row, ws))) == all);
    CHECK(sorted_ids(observe(nc::epsilon_cutoff(0.9f, k)(row, ws))) == all);
    CHECK(sorted_ids(observe(nc::eta_cutoff(0.9f, k)(row, ws))) == all);
    CHECK(sorted_ids(observe(nc::top_k(1, nc::ties::exact, k)(row, ws))) == all);
  }
  CHECK(sorted_ids(observe(nc::top_p(1e-6f, 3)(row, ws))) == ids{0, 2, 5});
  CHECK(sorted_ids(observe(nc::min_p(0.5f, 2)(row, ws))) == ids{0, 5});
  CHECK(sorted_ids(observe(nc::epsilon_cutoff(0.9f, 3)(row, ws))) == ids{0, 2, 5});
  CHECK(sorted_ids(observe(nc::eta_cutoff(0.9f, 2)(row, ws))) == ids{0, 5});
  CHECK(sorted_ids(observe(nc::top_k(1, nc::ties::exact, 3)(row, ws))) == ids{0, 2, 5});
  // One candidate, and none.
  const std::vector<float> one = {nan, 2.0f, ninf};
  CHECK(sorted_ids(observe(nc::top_p(0.5f, 3)(one, ws))) == ids{1});
  CHECK(sorted_ids(observe(nc::min_p(0.5f, 3)(one, ws))) == ids{1});
  const std::vector<float> none = {nan, ninf};
  CHECK(nc::top_p(0.5f, 3)(none, ws).status() == nc::status::no_candidates);
  CHECK(nc::min_p(0.5f, 3)(none, ws).status() == nc::status::no_candidates);
  // +inf forces its tokens; min_keep cannot bring back the finite ones (they are no candidates then).
  const std::vector<float> forced = {1.0f, ref::inf, 0.5f, ref::inf};
  CHECK(sorted_ids(observe(nc::top_p(1e-6f, 3)(forced, ws))) == ids{1, 3});
  CHECK(sorted_ids(observe(nc::min_p(1.0f, 3)(forced, ws))) == ids{1, 3});
}

TEST_CASE("min_keep: ties at the floor", "[stages][min_keep]") {
  nc::workspace ws;
  const std::vector<float> row = {0.0f, 2.0f, 1.0f, 1.0f, 1.0f, -1.0f};
  // top_p, min_p: exactly min_keep, ties to the lower id (the rank order).
  CHECK(sorted_ids(observe(nc::top_p(1e-6f, 2)(row, ws))) == ids{1, 2});
  CHECK(sorted_ids(observe(nc::top_p(1e-6f, 3)(row, ws))) == ids{1, 2, 3});
  CHECK(sorted_ids(observe(nc::min_p(1.0f, 2)(row, ws))) == ids{1, 2});
  // epsilon, eta: every token tied with the min_keep-th stays (Hugging Face's topk >= rule).
  CHECK(sorted_ids(observe(nc::epsilon_cutoff(0.9f, 2)(row, ws))) == ids{1, 2, 3, 4});
  CHECK(sorted_ids(observe(nc::eta_cutoff(0.9f, 2)(row, ws))) == ids{1, 2, 3, 4});
  // top_k(k, ties::keep, min_keep) is top_k(max(k, min_keep), ties::keep).
  CHECK(sorted_ids(observe(nc::top_k(1, nc::ties::keep, 2)(row, ws))) == ids{1, 2, 3, 4});
  CHECK(sorted_ids(observe(nc::top_k(0, nc::ties::exact, 2)(row, ws))).size() == row.size());  // k 0: off
}

TEST_CASE("min_keep: typical keeps the first min_keep in its own order, not in rank order",
          "[stages][min_keep][typical]") {
  nc::workspace ws;
  // p = .4 .3 .2 .1: H = 1.2799; |surprise - H| = .364, .076, .330, 1.023: the order is 1, 2, 0, 3.
  const auto row = log_row({0.4, 0.3, 0.2, 0.1});
  CHECK(sorted_ids(observe(nc::typical(0.2f)(row, ws))) == ids{1});
  CHECK(sorted_ids(observe(nc::typical(0.2f, 2)(row, ws))) == ids{1, 2});  // rank order would give 0, 1
  CHECK(sorted_ids(observe(nc::typical(0.2f, 3)(row, ws))) == ids{0, 1, 2});
  CHECK(sorted_ids(observe(nc::typical(0.5f, 2)(row, ws))) == ids{1, 2});  // the mass cut alone
}

TEST_CASE("min_keep: xtc removes nothing when fewer than min_keep candidates would remain",
          "[stages][min_keep][xtc]") {
  nc::workspace ws;
  // p = .4 .3 .2 .1, threshold .15: tokens 0, 1, 2 reach it; the cut leaves 2 and 3.
  auto row = log_row({0.4, 0.3, 0.2, 0.1});
  const nc::draw_key key{1, 2};
  CHECK(sorted_ids(observe(nc::xtc(1.0f, 0.15f, 2)(row, ws, key))) == ids{2, 3});
  CHECK(sorted_ids(observe(nc::xtc(1.0f, 0.15f, 3)(row, ws, key))) == ids{0, 1, 2, 3});
  // NaN and -inf entries are no candidates: they do not count towards min_keep (llama.cpp counts
  // every entry of its array).
  row.push_back(ref::nan);
  row.push_back(-ref::inf);
  CHECK(sorted_ids(observe(nc::xtc(1.0f, 0.15f, 3)(row, ws, key))) == ids{0, 1, 2, 3});
  CHECK(sorted_ids(observe(nc::xtc(1.0f, 0.15f, 2)(row, ws, key))) == ids{2, 3});
}

TEST_CASE("min_keep: greedy rows stay greedy; the output order is the stage's usual one",
          "[stages][min_keep]") {
  nc::workspace ws;
  const std::vector<float> row = {0.5f, 3.0f, 2.0f, 1.0f, 2.5f};
  const auto g = observe((nc::temperature(0.0f) | nc::top_p(0.5f, 4) | nc::min_p(0.5f, 4))(row, ws));
  CHECK(g.ids == ids{1});
  // An unsorted set stays in ascending id order; after top_k, rank order.
  const nc::distribution d = nc::min_p(0.9f, 3)(row, ws);
  CHECK(!d.sorted());
  CHECK(ids(d.ids().begin(), d.ids().end()) == ids{1, 2, 4});
  const nc::distribution t = (nc::top_k(4) | nc::top_p(1e-6f, 3))(row, ws);
  CHECK(t.sorted());
  CHECK(ids(t.ids().begin(), t.ids().end()) == ids{1, 4, 2});
}

TEST_CASE("min_keep: 16-bit rows give the float row's result", "[stages][min_keep][dtypes]") {
  nc::workspace ws;
  ref::rng g(0x16B);
  const std::vector<float> wide = ref::make_row(ref::row_kind::peaky, 5000, g);
  std::vector<nc::bf16> narrow;
  std::vector<float> back;
  for (float x : wide) {
    narrow.push_back(nc::to_bf16(x));
    back.push_back(nc::to_float(narrow.back()));
  }
  auto same = [&](const auto& stage) {
    const ref::observed a = observe(stage(std::span<const nc::bf16>(narrow), ws));
    const ref::observed b = observe(stage(std::span<const float>(back), ws));
    return a.ids == b.ids && a.probs == b.probs;
  };
  CHECK(same(nc::top_p(0.5f, 40)));
  CHECK(same(nc::min_p(0.5f, 40)));
  CHECK(same(nc::typical(0.5f, 40)));
  CHECK(same(nc::epsilon_cutoff(0.1f, 40)));
  CHECK(same(nc::eta_cutoff(0.1f, 40)));
}

TEST_CASE("min_keep: 0 and negative values are refused, naming min_keep", "[stages][min_keep]") {
  CHECK_THROWS_WITH(nc::top_p(0.5f, 0), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::min_p(0.5f, 0), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::typical(0.5f, -1), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::xtc(0.5f, 0.1f, 0), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::epsilon_cutoff(0.1f, 0), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::eta_cutoff(0.1f, std::numeric_limits<int>::min()), Contains("min_keep"));
  CHECK_THROWS_WITH(nc::top_k(5, nc::ties::keep, 0), Contains("min_keep"));
  CHECK_THROWS_AS(nc::top_p(0.5f, 0), std::invalid_argument);
  CHECK(nc::top_p(0.5f).min_keep == 1);
}
