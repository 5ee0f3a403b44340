// NaN and infinities, rows without candidates, empty rows, wrong spans, invalid parameters.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::observe;

namespace {

constexpr float inf_f = std::numeric_limits<float>::infinity();
constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

auto default_chain() {
  return nc::top_k(40) | nc::top_p(0.95f) | nc::min_p(0.05f) | nc::temperature(0.8f);
}

}  // namespace

TEST_CASE("bad input: NaN is never selected", "[core][bad_input]") {
  ref::rng g(0xBAD);
  nc::workspace ws;
  for (std::size_t V : {1u, 2u, 7u, 8u, 9u, 100u, 5000u}) {
    // NaN everywhere except a few weak tokens; NaN first, last, and on every other slot.
    std::vector<float> row(V, nan_f);
    for (std::size_t i = 1; i < V; i += 3) row[i] = static_cast<float>(g.uniform(-30.0, -20.0));
    if (V == 1) row[0] = nan_f;
    for (std::uint64_t pos = 0; pos < 200; ++pos) {
      nc::draw_key key{1, pos};
      for (nc::sample_result r :
           {nc::categorical()(row, ws, key), (default_chain() | nc::categorical())(row, ws, key),
            nc::argmax()(row, ws), (nc::temperature(5.0f) | nc::categorical())(row, ws, key)}) {
        if (r.status == nc::status::ok) {
          REQUIRE(r.token >= 0);
          REQUIRE(!std::isnan(row[static_cast<std::size_t>(r.token)]));
        } else {
          REQUIRE(V == 1);
          REQUIRE(r.status == nc::status::no_candidates);
        }
      }
    }
    auto d = observe(default_chain()(row, ws));
    for (auto id : d.ids) CHECK(!std::isnan(row[static_cast<std::size_t>(id)]));
  }
}

TEST_CASE("bad input: -inf is never selected; +inf tokens take all the mass equally", "[core][bad_input]") {
  nc::workspace ws;
  SECTION("-inf") {
    std::vector<float> row = {-inf_f, -1e30f, -inf_f, -1e30f, -inf_f};
    for (std::uint64_t pos = 0; pos < 100; ++pos) {
      auto r = nc::categorical()(row, ws, nc::draw_key{2, pos});
      CHECK((r.token == 1 || r.token == 3));
    }
    auto d = observe(nc::temperature(1.0f)(row, ws));
    REQUIRE(d.ids.size() == 2);
    for (float p : d.probs) CHECK(p == Approx(0.5).epsilon(1e-6));
  }
  SECTION("+inf") {
    std::vector<float> row = {3.0f, inf_f, nan_f, inf_f, -inf_f, 1e38f, inf_f};
    for (std::uint64_t pos = 0; pos < 300; ++pos) {
      auto r = (nc::temperature(0.5f) | nc::categorical())(row, ws, nc::draw_key{3, pos});
      REQUIRE(r.status == nc::status::ok);
      CHECK((r.token == 1 || r.token == 3 || r.token == 6));
      CHECK(r.logprob == Approx(-std::log(3.0)).margin(1e-5));
    }
    auto d = observe(default_chain()(row, ws));
    REQUIRE(d.ids.size() == 3);
    for (float p : d.probs) CHECK(p == Approx(1.0 / 3).epsilon(1e-6));
    CHECK(nc::argmax()(row, ws).token == 1);
    CHECK((nc::temperature(0.0f) | nc::categorical())(row, ws, nc::draw_key{}).token == 1);
    // Ranked by id among themselves: top_k(2) keeps the first two, top_p(0.5) the first two (0, 1/3 before).
    auto k2 = observe(nc::top_k(2)(row, ws));
    CHECK(k2.ids.size() == 2);
    ref::stage tk[] = {ref::top_k(2)}, tp[] = {ref::top_p(0.5)};
    CHECK(ref::check_distribution(row, tk, k2) == "");
    CHECK(ref::check_distribution(row, tp, observe(nc::top_p(0.5f)(row, ws))) == "");
  }
}

TEST_CASE("bad input: rows without candidates", "[core][bad_input]") {
  nc::workspace ws;
  for (std::vector<float> row :
       {std::vector<float>{nan_f}, std::vector<float>{-inf_f}, std::vector<float>(1000, nan_f),
        std::vector<float>(33, -inf_f), std::vector<float>{nan_f, -inf_f, nan_f, -inf_f, -inf_f}}) {
    INFO("V=" << row.size());
    for (nc::sample_result r : {nc::categorical()(row, ws, nc::draw_key{}), nc::argmax()(row, ws),
                                (default_chain() | nc::categorical())(row, ws, nc::draw_key{}),
                                (nc::temperature(0.0f) | nc::categorical())(row, ws, nc::draw_key{}),
                                (nc::top_k(3) | nc::argmax())(row, ws)}) {
      CHECK(r.status == nc::status::no_candidates);
      CHECK(r.token == -1);
      CHECK(r.logprob == 0.0f);
    }
    for (nc::distribution d : {default_chain()(row, ws)}) {
      CHECK(d.status() == nc::status::no_candidates);
      CHECK(d.size() == 0);
    }
    auto t0 = nc::temperature(0.0f)(row, ws);
    CHECK(t0.status() == nc::status::no_candidates);
    CHECK(t0.size() == 0);
  }
}

TEST_CASE("bad input: empty rows", "[core][bad_input]") {
  nc::workspace ws;
  std::span<const float> empty;
  for (nc::sample_result r : {nc::categorical()(empty, ws, nc::draw_key{}), nc::argmax()(empty, ws),
                              (default_chain() | nc::categorical())(empty, ws, nc::draw_key{}),
                              (nc::temperature(0.0f) | nc::argmax())(empty, ws)}) {
    CHECK(r.status == nc::status::empty_row);
    CHECK(r.token == -1);
  }
  auto d = default_chain()(empty, ws);
  CHECK(d.status() == nc::status::empty_row);
  CHECK(d.size() == 0);
  auto d0 = nc::temperature(0.0f)(empty, ws);
  CHECK(d0.status() == nc::status::empty_row);
  CHECK(d0.size() == 0);
}

TEST_CASE("bad input: invalid parameters throw std::invalid_argument at construction", "[core][bad_input]") {
  CHECK_THROWS_AS(nc::temperature(-0.5f), std::invalid_argument);
  CHECK_THROWS_AS(nc::temperature(-1e-30f), std::invalid_argument);
  CHECK_THROWS_AS(nc::temperature(nan_f), std::invalid_argument);
  CHECK_THROWS_AS(nc::temperature(inf_f), std::invalid_argument);
  CHECK_THROWS_AS(nc::temperature(-inf_f), std::invalid_argument);
  CHECK_NOTHROW(nc::temperature(0.0f));
  CHECK_NOTHROW(nc::temperature(1e-30f));
  CHECK_NOTHROW(nc::temperature(1e30f));

  CHECK_THROWS_AS(nc::top_p(0.0f), std::invalid_argument);
  CHECK_THROWS_AS(nc::top_p(-0.1f), std::invalid_argument);
  CHECK_THROWS_AS(nc::top_p(1.0001f), std::invalid_argument);
  CHECK_THROWS_AS(nc::top_p(nan_f), std::invalid_argument);
  CHECK_THROWS_AS(nc::top_p(inf_f), std::invalid_argument);
  CHECK_NOTHROW(nc::top_p(1.0f));
  CHECK_NOTHROW(nc::top_p(1e-30f));

  CHECK_THROWS_AS(nc::min_p(-0.01f), std::invalid_argument);
  CHECK_THROWS_AS(nc::min_p(1.0001f), std::invalid_argument);
  CHECK_THROWS_AS(nc::min_p(nan_f), std::invalid_argument);
  CHECK_THROWS_AS(nc::min_p(inf_f), std::invalid_argument);
  CHECK_NOTHROW(nc::min_p(0.0f));
  CHECK_NOTHROW(nc::min_p(1.0f));

  CHECK_NOTHROW(nc::top_k(0));
  CHECK_NOTHROW(nc::top_k(-5));
  CHECK_NOTHROW(nc::top_k(1 << 30));
}

TEST_CASE("bad input: wrong output span length throws std::invalid_argument", "[core][bad_input]") {
  std::vector<float> row = {0.5f, 1.5f, -2.0f, 0.0f, 4.0f};
  for (std::size_t n : {0u, 1u, 4u, 6u, 100u}) {
    std::vector<float> out(n);
    INFO("out.size()=" << n);
    CHECK_THROWS_AS(nc::log_softmax(row, out), std::invalid_argument);
  }
  std::vector<float> none;
  CHECK_THROWS_AS(nc::log_softmax(std::span<const float>(), none), std::invalid_argument);
}
