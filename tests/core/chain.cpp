// Composition: any subset of the stages in any order, T = 0 anywhere is argmax, the lone categorical,
// the order rules of a distribution, and reuse of one workspace across rows and chains.
#include <catch2/catch.hpp>

#include <array>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::observe;
using nucleus_cases::terminal;
using nucleus_ref::op;

namespace {

// Every ordered subset of {temperature, top_k, top_p, min_p}: 1 + 4 + 12 + 24 + 24 = 65 chains.
// A chain is encoded as base-5 digits (1..4 = op), most significant first.
constexpr auto ordered_subsets() {
  std::array<int, 65> out{};
  std::size_t n = 0;
  for (int code = 0; code < 5 * 5 * 5 * 5; ++code) {
    int digits[4] = {code / 125, code / 25 % 5, code / 5 % 5, code % 5};
    bool seen[5] = {}, ok = true, started = false;
    for (int d : digits) {
      if (d == 0) {
        if (started) ok = false;  // zeros only as leading padding
        continue;
      }
      started = true;
      if (seen[d]) ok = false;
      seen[d] = true;
    }
    if (ok) out[n++] = code;
  }
  return out;
}
constexpr auto subsets = ordered_subsets();
static_assert(subsets[64] != 0, "65 ordered subsets");

constexpr std::size_t length(int code) {
  return code >= 125 ? 4 : code >= 25 ? 3 : code >= 5 ? 2 : code >= 1 ? 1 : 0;
}
constexpr int digit(int code, std::size_t i) {  // i-th op, first = most significant
  int div = 1;
  for (std::size_t k = i + 1; k < length(code); ++k) div *= 5;
  return code / div % 5;
}

struct params {
  float T = 0.8f;
  int k = 40;
  float p = 0.9f;
  float m = 0.05f;
};

template <int D>
auto lib_stage(const params& q) {
  if constexpr (D == 1)
    return nc::temperature(q.T);
  else if constexpr (D == 2)
    return nc::top_k(q.k);
  else if constexpr (D == 3)
    return nc::top_p(q.p);
  else
    return nc::min_p(q.m);
}

ref::stage ref_stage(int d, const params& q) {
  switch (d) {
    case 1:
      return ref::temperature(q.T);
    case 2:
      return ref::top_k(q.k);
    case 3:
      return ref::top_p(q.p);
    default:
      return ref::min_p(q.m);
  }
}

template <int Code, std::size_t... I>
auto lib_proc(const params& q, std::index_sequence<I...>) {
  return (lib_stage<digit(Code, I)>(q) | ...);
}

std::vector<ref::stage> ref_chain(int code, const params& q) {
  std::vector<ref::stage> out;
  for (std::size_t i = 0; i < length(code); ++i) out.push_back(ref_stage(digit(code, i), q));
  return out;
}

// fn(code, proc, stages) for every non-empty ordered subset.
template <class F>
void for_each_subset(const params& q, F&& fn) {
  [&]<std::size_t... S>(std::index_sequence<S...>) {
    (
        [&] {
          constexpr int code = subsets[S];
          if constexpr (code != 0)
            fn(code, lib_proc<code>(q, std::make_index_sequence<length(code)>{}), ref_chain(code, q));
        }(),
        ...);
  }
  (std::make_index_sequence<subsets.size()>{});
}

}  // namespace

TEST_CASE("chain: every ordered subset of the stages matches the reference", "[core][chain]") {
  ref::rng g(0xC4A1);
  error_log log;
  nc::workspace ws;
  std::vector<std::vector<float>> rows;
  for (std::size_t V : {1u, 2u, 9u, 300u, 1000u}) {
    rows.push_back(ref::peaky_row(V, g));
    rows.push_back(ref::uniform_row(V, g));
    rows.push_back(ref::make_row(ref::row_kind::pos_inf, V, g));
    rows.push_back(ref::make_row(ref::row_kind::nan, V, g));
  }
  for (params q : {params{}, params{2.0f, 3, 0.5f, 0.2f}, params{0.3f, 1000, 0.99f, 0.001f}}) {
    for_each_subset(q, [&](int, const auto& proc, const std::vector<ref::stage>& stages) {
      for (auto& row : rows) {
        for (std::uint64_t pos = 0; pos < 3; ++pos) {
          log.add(nucleus_cases::check_case(proc, proc | nc::categorical(), terminal::categorical, row,
                                            stages, ws, nc::draw_key{17, pos}));
        }
        log.add(nucleus_cases::check_case(proc, proc | nc::argmax(), terminal::argmax, row, stages, ws,
                                          nc::draw_key{}));
      }
    });
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked == 3 * 64 * rows.size() * 4);
}

TEST_CASE("chain: temperature 0 anywhere gives the argmax", "[core][chain]") {
  ref::rng g(0x7E60);
  error_log log;
  nc::workspace ws;
  std::vector<std::vector<float>> rows;
  for (auto kind : ref::candidate_row_kinds) rows.push_back(ref::make_row(kind, 1 + g.below(2000), g));
  params q;
  q.T = 0.0f;
  for_each_subset(q, [&](int code, const auto& proc, const std::vector<ref::stage>& stages) {
    auto check = [&](const auto& p, const std::vector<ref::stage>& st, const char* where) {
      for (auto& row : rows) {
        std::int32_t want = ref::argmax(row);
        nc::sample_result r = (p | nc::categorical())(row, ws, nc::draw_key{3, 4});
        auto d = observe(p(row, ws));
        bool ok = r.status == nc::status::ok && r.token == want && r.logprob == 0.0f && d.ids.size() == 1 &&
                  d.ids[0] == want && d.probs[0] == 1.0f;
        log.add(ok ? ""
                   : ref::describe(st) + " (" + where + "): token " + std::to_string(r.token) + " logprob " +
                         std::to_string(r.logprob) + " size " + std::to_string(d.ids.size()) + ", argmax " +
                         std::to_string(want));
        log.add(ref::check_distribution(row, st, d));
      }
    };
    bool has_temperature = false;
    for (std::size_t i = 0; i < length(code); ++i) has_temperature |= digit(code, i) == 1;
    if (has_temperature) {
      check(proc, stages, "inside");
    } else {
      auto front = stages, back = stages;
      front.insert(front.begin(), ref::temperature(0));
      back.push_back(ref::temperature(0));
      check(nc::temperature(0.0f) | proc, front, "front");
      check(proc | nc::temperature(0.0f), back, "back");
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
}

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
