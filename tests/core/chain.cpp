// Composition: the deterministic case set, the order rules of a distribution, the lone categorical,
// and reuse of one workspace across rows and chains. (Every ordered subset: chain_subsets.cpp; T = 0
// anywhere: chain_greedy.cpp.)
#include <catch2/catch.hpp>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::observe;
using nucleus_cases::terminal;

TEST_CASE("chain: the deterministic case set against the reference", "[core][chain]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_case(12000, [&](const nucleus_cases::test_case& c) {
    nucleus_cases::with_chain(c.chain, [&](const auto& proc, const auto& chain) {
      std::string e = nucleus_cases::check_case(proc, chain, c.chain.term, c.row, c.chain.stages, ws, c.key);
      log.add(nucleus_cases::with_kind(c.kind, e.empty() ? e : "case " + std::to_string(c.index) + ": " + e));
    });
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked == 12000);
}

TEST_CASE("chain: distributions follow the order rule", "[core][chain]") {
  // check_distribution enforces it; here chains that may or may not sort are run on tie-heavy rows.
  nc::workspace ws;
  std::vector<float> row(300);
  for (std::size_t i = 0; i < row.size(); ++i)
    row[i] = static_cast<float>((i * 37) % 11);  // 11 levels, many ties
  error_log log;
  ref::stage tk[] = {ref::top_k(50)}, tp[] = {ref::top_p(0.5f)}, mp[] = {ref::min_p(0.3f)},
             t[] = {ref::temperature(0.5f)};
  log.add(nucleus_cases::check_proc(nc::top_k(50), row, tk, ws));
  log.add(nucleus_cases::check_proc(nc::top_p(0.5f), row, tp, ws));
  log.add(nucleus_cases::check_proc(nc::min_p(0.3f), row, mp, ws));
  log.add(nucleus_cases::check_proc(nc::temperature(0.5f), row, t, ws));
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 4);
  // The rule itself, on what the library returned.
  auto check_order = [](const nc::distribution& d) {
    for (std::size_t i = 1; i < d.size(); ++i) {
      if (d.sorted()) {
        bool ok = d.probs()[i - 1] > d.probs()[i] ||
                  (d.probs()[i - 1] == d.probs()[i] && d.ids()[i - 1] < d.ids()[i]);
        if (!ok) return false;
      } else if (!(d.ids()[i - 1] < d.ids()[i])) {
        return false;
      }
    }
    return true;
  };
  CHECK(check_order(nc::top_k(50)(row, ws)));
  CHECK(check_order(nc::top_p(0.5f)(row, ws)));
  CHECK(check_order(nc::min_p(0.3f)(row, ws)));
  CHECK(check_order((nc::temperature(2.0f) | nc::top_k(100) | nc::top_p(0.7f))(row, ws)));
}

TEST_CASE("chain: one workspace reused across rows and chains gives the fresh-workspace results",
          "[core][chain]") {
  ref::rng g(0x5EED);
  auto a = nc::temperature(0.8f) | nc::top_k(40) | nc::top_p(0.95f) | nc::categorical();
  auto b = nc::min_p(0.1f) | nc::categorical();
  auto pa = nc::top_p(0.9f) | nc::temperature(1.5f);
  nc::workspace shared;
  for (int rep = 0; rep < 60; ++rep) {
    // Sizes jump up and down so buffers grow and are then reused for smaller rows.
    std::size_t V = rep % 3 == 0 ? 30000 + g.below(5000) : 1 + g.below(3000);
    auto row = ref::make_row(ref::candidate_row_kinds[static_cast<std::size_t>(rep) % 9], V, g);
    nc::draw_key key{77, static_cast<std::uint64_t>(rep)};
    nc::workspace f1, f2, f3;
    CHECK(a(row, shared, key) == a(row, f1, key));
    CHECK(b(row, shared, key) == b(row, f2, key));
    auto ds = observe(pa(row, shared));
    auto df = observe(pa(row, f3));
    CHECK(ds.ids == df.ids);
    CHECK(ds.probs == df.probs);
    CHECK(ds.sorted == df.sorted);
  }
}

TEST_CASE("chain: a lone categorical, and stages that cut nothing", "[core][chain]") {
  ref::rng g(0x10E);
  nc::workspace ws;
  error_log log;
  // top_k(0), top_p(1), min_p(0), temperature(1) keep everything and change nothing.
  ref::stage noop[] = {ref::top_k(0), ref::top_p(1.0), ref::min_p(0.0), ref::temperature(1.0)};
  auto proc = nc::top_k(0) | nc::top_p(1.0f) | nc::min_p(0.0f) | nc::temperature(1.0f);
  for (int rep = 0; rep < 40; ++rep) {
    auto row =
        ref::make_row(ref::candidate_row_kinds[static_cast<std::size_t>(rep) % 9], 1 + g.below(2000), g);
    nc::draw_key key{5, static_cast<std::uint64_t>(rep)};
    log.add(nucleus_cases::check_case(nucleus_cases::no_proc{}, nc::categorical(), terminal::categorical, row,
                                      {}, ws, key));
    log.add(
        nucleus_cases::check_case(proc, proc | nc::categorical(), terminal::categorical, row, noop, ws, key));
    auto d = observe(proc(row, ws));
    if (d.ids.size() != ref::candidates(row).c.size())
      log.add("no-op stages cut " + std::to_string(d.ids.size()));
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 80);
}

TEST_CASE("chain: the reference rejects wrong answers", "[core][chain]") {
  // The checks above are only as good as check_distribution: it must catch a wrong set or probability.
  ref::rng g(1);
  auto row = ref::peaky_row(100, g);
  ref::stage chain[] = {ref::top_k(10)};
  nc::workspace ws;
  auto good = observe(nc::top_k(10)(row, ws));
  REQUIRE(ref::check_distribution(row, chain, good) == "");
  auto dropped = good;
  dropped.ids.pop_back();
  dropped.probs.pop_back();
  CHECK(ref::check_distribution(row, chain, dropped) != "");
  auto skewed = good;
  skewed.probs[0] *= 1.0001f;
  CHECK(ref::check_distribution(row, chain, skewed) != "");
  auto swapped = good;
  std::swap(swapped.ids[0], swapped.ids[1]);
  CHECK(ref::check_distribution(row, chain, swapped) != "");
  ref::stage wider[] = {ref::top_k(11)};
  CHECK(ref::check_distribution(row, wider, good) != "");
}
