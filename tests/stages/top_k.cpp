// top_k(k): candidates by (logit desc, id asc), the first k kept; k <= 0 disables, k >= V keeps all.
#include <catch2/catch.hpp>

#include <algorithm>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::check_proc;
using nucleus_cases::error_log;
using nucleus_cases::observe;
using nucleus_cases::sorted_ids;
using nucleus_cases::with_kind;

TEST_CASE("top_k: survivors and probabilities match the reference", "[stages][top_k]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x70B4, [&](const nucleus_cases::sweep_row& r) {
    const int V = static_cast<int>(r.V);
    std::vector<int> ks =
        r.big ? std::vector<int>{40, V / 3} : std::vector<int>{1, 2, 5, 40, V - 1, V, V + 1, 0, -1};
    for (int k : ks) {
      ref::stage chain[] = {ref::top_k(k)};
      ref::observed o;
      log.add(with_kind(r.kind, check_proc(nc::top_k(k), r.row, chain, ws, &o)));
      // Exactly min(k, candidates) survive (all of them when disabled).
      std::size_t cands = ref::candidates(r.row).c.size();
      std::size_t want = k <= 0 ? cands : std::min<std::size_t>(static_cast<std::size_t>(k), cands);
      if (o.ids.size() != want)
        log.add(with_kind(r.kind, "top_k(" + std::to_string(k) + ") V=" + std::to_string(V) + " kept " +
                                      std::to_string(o.ids.size()) + ", want " + std::to_string(want)));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 100);
}

TEST_CASE("top_k: ties at the boundary go to the lower ids", "[stages][top_k]") {
  nc::workspace ws;
  SECTION("all equal") {
    std::vector<float> row(10, 1.5f);
    auto o = observe(nc::top_k(3)(row, ws));
    CHECK(sorted_ids(o) == std::vector<std::int32_t>{0, 1, 2});
    for (float p : o.probs) CHECK(p == Approx(1.0 / 3).epsilon(1e-6));
  }
  SECTION("a tie straddling the cut") {
    std::vector<float> row = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 2.0f, 0.5f};
    CHECK(sorted_ids(observe(nc::top_k(2)(row, ws))) == std::vector<std::int32_t>{1, 3});
    CHECK(sorted_ids(observe(nc::top_k(3)(row, ws))) == std::vector<std::int32_t>{1, 2, 3});
    CHECK(sorted_ids(observe(nc::top_k(4)(row, ws))) == std::vector<std::int32_t>{1, 2, 3, 4});
  }
  SECTION("a wide tie in a big row") {
    ref::rng g(5);
    std::vector<float> row = ref::uniform_row(50000, g, -10.0, 0.0);
    for (std::size_t i = 0; i < row.size(); i += 7) row[i] = 2.0f;  // 7143 tied tokens at the top
    auto o = observe(nc::top_k(100)(row, ws));
    std::vector<std::int32_t> want;
    for (std::int32_t i = 0; want.size() < 100; i += 7) want.push_back(i);
    CHECK(sorted_ids(o) == want);
  }
  SECTION("+inf tokens: the lowest ids") {
    std::vector<float> row = {0.0f, ref::inf, 5.0f, ref::inf, ref::nan, ref::inf};
    auto o = observe(nc::top_k(2)(row, ws));
    CHECK(sorted_ids(o) == std::vector<std::int32_t>{1, 3});
    for (float p : o.probs) CHECK(p == Approx(0.5).epsilon(1e-6));
  }
}

TEST_CASE("top_k: temperature before does not change which survive", "[stages][top_k]") {
  ref::rng g(17);
  nc::workspace ws;
  for (int rep = 0; rep < 20; ++rep) {
    auto row = ref::peaky_row(500 + 37 * static_cast<std::size_t>(rep), g);
    auto plain = sorted_ids(observe(nc::top_k(25)(row, ws)));
    auto hot = sorted_ids(observe((nc::temperature(3.0f) | nc::top_k(25))(row, ws)));
    auto cold = sorted_ids(observe((nc::temperature(0.2f) | nc::top_k(25))(row, ws)));
    CHECK(plain == hot);
    CHECK(plain == cold);
    ref::stage chain[] = {ref::temperature(3.0), ref::top_k(25)};
    CHECK(check_proc(nc::temperature(3.0f) | nc::top_k(25), row, chain, ws) == "");
  }
}

TEST_CASE("top_k: -0 and +0 are a tie, broken by id; ties::keep keeps both", "[stages][top_k]") {
  nc::workspace ws;
  for (bool neg_first : {true, false}) {
    const float a = neg_first ? -0.0f : 0.0f, b = neg_first ? 0.0f : -0.0f;
    const std::vector<float> row = {a, b, -1.0f, -2.0f};
    const auto exact = nc::top_k(1)(std::span<const float>(row), ws);
    REQUIRE(exact.size() == 1);
    CHECK(exact.ids()[0] == 0);
    const auto keep = nc::top_k(1, nc::ties::keep)(std::span<const float>(row), ws);
    REQUIRE(keep.size() == 2);
    CHECK(keep.ids()[0] == 0);
    CHECK(keep.ids()[1] == 1);
    CHECK(nc::argmax()(row, ws).token == 0);
    CHECK(nc::top_logprobs(row, 1, ws)[0].token == 0);
  }
}
