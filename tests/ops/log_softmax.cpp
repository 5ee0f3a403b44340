// log_softmax(logits, out): raw (T = 1) log-probabilities of every token.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::with_kind;

namespace {

// Empty when out agrees with the reference: candidates within logprob_tol, -inf stays -inf (as do values
// beyond the float range). NaN inputs
// have no documented output; they must only not disturb the others.
std::string compare(std::span<const float> row, std::span<const float> out) {
  auto want = ref::log_softmax(row);
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i])) continue;
    bool ok = std::fabs(out[i] - want[i]) <= ref::logprob_tol(want[i]);
    if (want[i] < -std::numeric_limits<float>::max()) ok = out[i] == -ref::inf;  // beyond float (huge rows)
    if (!ok) {
      std::ostringstream os;
      os.precision(10);
      os << "V=" << row.size() << " token " << i << " (logit " << row[i] << "): " << out[i] << ", reference "
         << want[i];
      return os.str();
    }
  }
  return {};
}

}  // namespace

TEST_CASE("log_softmax: matches the reference on every row kind", "[ops][log_softmax]") {
  error_log log;
  nucleus_cases::for_each_sweep_row(0x1065, [&](const nucleus_cases::sweep_row& r) {
    if (r.kind == ref::row_kind::no_candidates) return;
    std::vector<float> out(r.V, 12345.0f);
    nc::status s = nc::log_softmax(r.row, out);
    if (s != nc::status::ok) log.add(with_kind(r.kind, "status " + std::string(nc::to_string(s))));
    log.add(with_kind(r.kind, compare(r.row, out)));
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 50);
}

TEST_CASE("log_softmax: within 1e-5 of the double reference for logits in [-1e4, 1e4]",
          "[ops][log_softmax]") {
  ref::rng g(0x1E4);
  error_log log;
  for (std::size_t V : {1u, 2u, 7u, 8u, 9u, 100u, 1000u, 32000u}) {
    for (int rep = 0; rep < 4; ++rep) {
      auto row = rep % 2 ? ref::large_row(V, g) : ref::uniform_row(V, g, -1e4, 1e4);
      std::vector<float> out(V);
      nc::status s = nc::log_softmax(row, out);
      if (s != nc::status::ok) log.add("status " + std::string(nc::to_string(s)));
      log.add(compare(row, out));
      // Where a float can hold it (|value| < 64, ulp < 1e-5), the error is 1e-5 absolute, flat.
      auto want = ref::log_softmax(row);
      for (std::size_t i = 0; i < V; ++i)
        if (std::fabs(want[i]) < 64 && !(std::fabs(out[i] - want[i]) <= 1e-5))
          log.add("V=" + std::to_string(V) + " token " + std::to_string(i) + ": " + std::to_string(out[i]) +
                  " vs " + std::to_string(want[i]));
    }
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 32);
}

TEST_CASE("log_softmax: the probabilities sum to 1", "[ops][log_softmax]") {
  ref::rng g(3);
  for (std::size_t V : {1u, 9u, 1000u, 151936u}) {
    auto row = ref::peaky_row(V, g);
    std::vector<float> out(V);
    REQUIRE(nc::log_softmax(row, out) == nc::status::ok);
    double sum = 0;
    for (float x : out) sum += std::exp(static_cast<double>(x));
    CHECK(sum == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("log_softmax: infinities", "[ops][log_softmax]") {
  std::vector<float> out(6);
  SECTION("-inf gives -inf and no mass") {
    std::vector<float> row = {0.0f, -ref::inf, 0.0f, -ref::inf, 0.0f, 0.0f};
    REQUIRE(nc::log_softmax(row, out) == nc::status::ok);
    for (std::size_t i = 0; i < 6; ++i) {
      if (row[i] == -ref::inf)
        CHECK(out[i] == -ref::inf);
      else
        CHECK(out[i] == Approx(-std::log(4.0)).margin(1e-6));
    }
  }
  SECTION("+inf tokens share the mass equally") {
    std::vector<float> row = {ref::inf, 3.0f, ref::inf, -ref::inf, 1e30f, ref::inf};
    REQUIRE(nc::log_softmax(row, out) == nc::status::ok);
    for (std::size_t i = 0; i < 6; ++i) {
      if (row[i] == ref::inf)
        CHECK(out[i] == Approx(-std::log(3.0)).margin(1e-6));
      else
        CHECK(out[i] == -ref::inf);
    }
  }
  SECTION("NaN takes no mass") {
    std::vector<float> row = {ref::nan, 1.0f, 1.0f, ref::nan, ref::nan, -ref::inf};
    REQUIRE(nc::log_softmax(row, out) == nc::status::ok);
    CHECK(out[1] == Approx(-std::log(2.0)).margin(1e-6));
    CHECK(out[2] == Approx(-std::log(2.0)).margin(1e-6));
    CHECK(out[5] == -ref::inf);
  }
  SECTION("no candidates") {
    std::vector<float> row = {ref::nan, -ref::inf, -ref::inf, ref::nan, ref::nan, -ref::inf};
    CHECK(nc::log_softmax(row, out) == nc::status::no_candidates);
  }
}

TEST_CASE("log_softmax: bad spans throw std::invalid_argument", "[ops][log_softmax]") {
  std::vector<float> row = {1.0f, 2.0f, 3.0f};
  std::vector<float> shorter(2), longer(4), empty_out;
  CHECK_THROWS_AS(nc::log_softmax(row, shorter), std::invalid_argument);
  CHECK_THROWS_AS(nc::log_softmax(row, longer), std::invalid_argument);
  CHECK_THROWS_AS(nc::log_softmax(std::span<const float>(), empty_out), std::invalid_argument);
  std::vector<float> out(3);
  CHECK_NOTHROW(nc::log_softmax(row, out));
}
