// Draws follow the processed distribution: Pearson chi-square over 10^6 draws per chain against the
// reference, critical value at z = 6 (false failure ~1e-9). Keys: fixed seed, position 0 .. N-1.
#include <catch2/catch.hpp>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

constexpr std::uint64_t draws = 1'000'000;

enum class vary { position, seed };

template <class Chain>
void check_draws(const Chain& chain, std::span<const float> row, std::span<const ref::stage> stages,
                 vary what = vary::position) {
  ref::distribution want = ref::process(row, stages);
  REQUIRE(want.st == ref::status::ok);
  REQUIRE(want.ambiguous == 0);  // no razor-close cut: the expected distribution is exact
  std::vector<double> probs(row.size(), 0.0);
  for (auto& e : want.entries) probs[static_cast<std::size_t>(e.id)] = e.prob;
  std::vector<std::uint64_t> counts(row.size(), 0);
  nc::workspace ws;
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < draws; ++i) {
    nc::draw_key key = what == vary::position ? nc::draw_key{0x5A3D1E, i} : nc::draw_key{i, 7};
    nc::sample_result r = chain(row, ws, key);
    if (r.status != nc::status::ok || r.token < 0 || static_cast<std::size_t>(r.token) >= row.size())
      ++bad;
    else
      ++counts[static_cast<std::size_t>(r.token)];
  }
  REQUIRE(bad == 0);
  ref::chi_square_result chi = ref::chi_square(counts, probs);
  INFO(ref::describe(stages) << " V=" << row.size() << ": chi2 " << chi.statistic << " df " << chi.df
                             << " critical " << chi.critical << " outside " << chi.outside << " survivors "
                             << want.entries.size());
  CHECK(chi.outside == 0);
  CHECK(chi.df >= 1);
  CHECK(chi.statistic <= chi.critical);
}

}  // namespace

TEST_CASE("statistics: the chi-square helper rejects a wrong distribution", "[core][statistics]") {
  // Counts 2% high on one half and 2% low on the other must fail; the exact expectation must pass.
  std::vector<double> probs(10, 0.1);
  std::vector<std::uint64_t> exact(10, 100000), skewed(10, 0);
  for (std::size_t i = 0; i < 10; ++i) skewed[i] = i < 5 ? 102000 : 98000;
  CHECK(ref::chi_square(exact, probs).pass());
  CHECK(!ref::chi_square(skewed, probs).pass());
  std::vector<std::uint64_t> outside = exact;
  std::vector<double> with_zero = probs;
  with_zero[3] = 0.0;
  CHECK(!ref::chi_square(outside, with_zero).pass());
  // Wilson-Hilferty at z = 6 for df = 100: about 210 (upper 1e-9 quantile).
  CHECK(ref::chi_square_quantile(100, 6.0) == Approx(210).margin(3));
}

TEST_CASE("statistics: plain categorical on a peaky row", "[core][statistics]") {
  ref::rng g(64);
  auto row = ref::peaky_row(64, g);
  check_draws(nc::categorical(), row, {});
}

TEST_CASE("statistics: plain categorical, seeds varied instead of positions", "[core][statistics]") {
  ref::rng g(65);
  auto row = ref::uniform_row(64, g, -2.0, 2.0);
  check_draws(nc::categorical(), row, {}, vary::seed);
}

TEST_CASE("statistics: plain categorical over many blocks", "[core][statistics]") {
  ref::rng g(2500);
  auto row = ref::uniform_row(2500, g, -1.0, 1.0);  // three blocks of exp sums
  check_draws(nc::categorical(), row, {});
}

TEST_CASE("statistics: temperature 0.7 | top_k 40", "[core][statistics]") {
  ref::rng g(40);
  auto row = ref::uniform_row(200, g, -3.0, 3.0);
  ref::stage st[] = {ref::temperature(0.7f), ref::top_k(40)};
  check_draws(nc::temperature(0.7f) | nc::top_k(40) | nc::categorical(), row, st);
}

TEST_CASE("statistics: top_p 0.9", "[core][statistics]") {
  ref::rng g(90);
  auto row = ref::uniform_row(120, g, -3.0, 3.0);
  ref::stage st[] = {ref::top_p(0.9f)};
  check_draws(nc::top_p(0.9f) | nc::categorical(), row, st);
}

TEST_CASE("statistics: min_p 0.05", "[core][statistics]") {
  ref::rng g(5);
  auto row = ref::peaky_row(64, g);
  for (std::size_t i = 0; i < row.size(); i += 3) row[i] = static_cast<float>(g.uniform(11.0, 14.0));
  ref::stage st[] = {ref::min_p(0.05f)};
  check_draws(nc::min_p(0.05f) | nc::categorical(), row, st);
}

TEST_CASE("statistics: the default chain top_k 40 | top_p 0.95 | min_p 0.05 | temperature 0.8",
          "[core][statistics]") {
  ref::rng g(95);
  auto row = ref::uniform_row(200, g, -2.0, 2.0);
  ref::stage st[] = {ref::top_k(40), ref::top_p(0.95f), ref::min_p(0.05f), ref::temperature(0.8f)};
  check_draws(nc::top_k(40) | nc::top_p(0.95f) | nc::min_p(0.05f) | nc::temperature(0.8f) | nc::categorical(),
              row, st);
}
