// categorical(): one draw from the renormalized survivors, a pure function of (logits, chain, key).
#include <catch2/catch.hpp>

#include <set>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::terminal;
using nucleus_cases::with_kind;

TEST_CASE("categorical alone: a candidate with the reference logprob", "[stages][categorical]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0xCA7, [&](const nucleus_cases::sweep_row& r) {
    for (std::uint64_t pos = 0; pos < (r.big ? 3u : 40u); ++pos)
      log.add(with_kind(r.kind, nucleus_cases::check_case(nucleus_cases::no_proc{}, nc::categorical(),
                                                          terminal::categorical, r.row, {}, ws,
                                                          nc::draw_key{0xC0FFEE, pos})));
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 2000);
}

namespace {

// The library's token for `key` must be where the reference running sum (in the library's distribution
// order) first exceeds u, give or take 1e-5 of probability at a boundary.
std::string check_draw_rule(const ref::observed& lib, std::span<const float> row,
                            std::span<const ref::stage> stages, nc::draw_key key, std::int32_t token) {
  std::vector<char> member(row.size(), 0);
  for (auto id : lib.ids) member[static_cast<std::size_t>(id)] = 1;
  ref::distribution want = ref::guided_reference(row, stages, member);
  if (want.greedy || lib.ids.empty()) return {};
  std::vector<double> probs;
  for (auto id : lib.ids) probs.push_back(want.find(id) ? want.find(id)->prob : 0.0);
  double u = ref::draw_uniform(key.seed, key.position);
  ref::draw_range r = ref::draw_positions(probs, u);
  for (std::size_t i = r.lo; i <= r.hi; ++i)
    if (lib.ids[i] == token) return {};
  std::ostringstream os;
  os << ref::context(row, stages) << " key {" << key.seed << ", " << key.position << "} u=" << u << ": drew "
     << token << ", the rule gives " << lib.ids[r.lo] << (r.hi > r.lo ? " (or a neighbour)" : "");
  return os.str();
}

}  // namespace

TEST_CASE("categorical: the token is the first survivor whose running sum exceeds u",
          "[stages][categorical]") {
  error_log log;
  nc::workspace ws;
  auto run = [&](const auto& proc, std::span<const ref::stage> stages, const std::vector<float>& row,
                 std::uint64_t keys) {
    ref::observed lib = nucleus_cases::observe(proc(row, ws));
    for (std::uint64_t pos = 0; pos < keys; ++pos) {
      nc::draw_key key{0xD2A3, pos};
      log.add(check_draw_rule(lib, row, stages, key, (proc | nc::categorical())(row, ws, key).token));
    }
  };
  nucleus_cases::for_each_sweep_row(0xD2A3, [&](const nucleus_cases::sweep_row& r) {
    if (r.kind == ref::row_kind::no_candidates || r.row.empty()) return;
    std::uint64_t keys = r.big ? 5 : 50;
    ref::stage t[] = {ref::temperature(0.8f)}, kt[] = {ref::top_k(40), ref::temperature(1.2f)},
               tp[] = {ref::top_p(0.9f)}, mk[] = {ref::min_p(0.05f), ref::top_k(100)};
    run(nc::temperature(0.8f), t, r.row, keys);
    run(nc::top_k(40) | nc::temperature(1.2f), kt, r.row, keys);
    run(nc::top_p(0.9f), tp, r.row, keys);
    run(nc::min_p(0.05f) | nc::top_k(100), mk, r.row, keys);
    // A lone categorical draws over the candidates in id order (nothing sorted them).
    ref::observed all = nucleus_cases::nominal_observed(r.row, {});
    for (std::uint64_t pos = 0; pos < keys; ++pos) {
      nc::draw_key key{0xD2A4, pos};
      log.add(
          with_kind(r.kind, check_draw_rule(all, r.row, {}, key, nc::categorical()(r.row, ws, key).token)));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 1000);
}

TEST_CASE("categorical: same key, same token; across calls and fresh workspaces", "[stages][categorical]") {
  ref::rng g(404);
  auto chain = nc::top_k(50) | nc::temperature(1.3f) | nc::categorical();
  for (int rep = 0; rep < 30; ++rep) {
    auto row =
        ref::make_row(ref::candidate_row_kinds[static_cast<std::size_t>(rep) % 9], 1 + g.below(4000), g);
    nc::draw_key key{g.next(), g.below(1000)};
    nc::workspace ws;
    nc::sample_result first = chain(row, ws, key);
    nc::sample_result lone = nc::categorical()(row, ws, key);
    for (int again = 0; again < 3; ++again) {
      nc::workspace fresh;
      CHECK(chain(row, fresh, key) == first);
      CHECK(chain(row, ws, key) == first);
      CHECK(nc::categorical()(row, fresh, key) == lone);
    }
    // Using the workspace for another row in between changes nothing.
    auto other = ref::uniform_row(5000, g);
    (void)chain(other, ws, key);
    CHECK(chain(row, ws, key) == first);
  }
}

TEST_CASE("categorical: the key drives the draw", "[stages][categorical]") {
  // 1000 equally likely tokens: 200 positions (or seeds) giving fewer than 100 distinct tokens would be
  // a broken generator (the chance for a good one is far below 1e-30).
  std::vector<float> row(1000, 0.5f);
  nc::workspace ws;
  std::set<std::int32_t> by_position, by_seed;
  for (std::uint64_t i = 0; i < 200; ++i) {
    by_position.insert(nc::categorical()(row, ws, nc::draw_key{42, i}).token);
    by_seed.insert(nc::categorical()(row, ws, nc::draw_key{i, 42}).token);
  }
  CHECK(by_position.size() > 100);
  CHECK(by_seed.size() > 100);
}

TEST_CASE("categorical: a single survivor is drawn with logprob 0", "[stages][categorical]") {
  nc::workspace ws;
  std::vector<float> one = {3.0f};
  for (std::uint64_t pos = 0; pos < 20; ++pos) {
    nc::sample_result r = nc::categorical()(one, ws, nc::draw_key{1, pos});
    CHECK(r.token == 0);
    CHECK(r.status == nc::status::ok);
    CHECK(r.logprob == Approx(0.0).margin(1e-6));
  }
  std::vector<float> row = {1.0f, 9.0f, 2.0f, 9.0f};
  for (std::uint64_t pos = 0; pos < 20; ++pos) {
    nc::sample_result r = (nc::top_k(1) | nc::categorical())(row, ws, nc::draw_key{1, pos});
    CHECK(r.token == 1);
    CHECK(r.logprob == Approx(0.0).margin(1e-6));
  }
}

TEST_CASE("categorical: never draws a token of probability 0", "[stages][categorical]") {
  // One token at 0, the rest 120 below: exp(-120) is ~1e-52, 0 in float and in any draw.
  std::vector<float> row(4096, -120.0f);
  row[1234] = 0.0f;
  nc::workspace ws;
  for (std::uint64_t pos = 0; pos < 2000; ++pos) {
    nc::sample_result r = nc::categorical()(row, ws, nc::draw_key{9, pos});
    REQUIRE(r.token == 1234);
  }
}
