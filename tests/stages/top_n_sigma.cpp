// top_n_sigma(n): keep x >= max - n * sigma; the set does not depend on the temperature.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("top_n_sigma: survivors and probabilities match the reference", "[stages][top_n_sigma]") {
  nucleus_cases::sweep_stage(
      0x516, {-1.0f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f}, {1.0f},
      [](float T, float n, std::span<const float> row, nc::workspace& ws) {
        return (nc::temperature(T) | nc::top_n_sigma(n))(row, ws);
      },
      [](const ref::state& s, double n) { return ref::top_n_sigma(s, n); }, "top_n_sigma");
}

TEST_CASE("top_n_sigma: hand-computed cut", "[stages][top_n_sigma]") {
  nc::workspace ws;
  // mean 2, sigma sqrt(2): max - 1 sigma = 4 - 1.414 = 2.586; -inf and NaN are not counted.
  std::vector<float> row = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, -ref::inf, ref::nan};
  auto o = nucleus_cases::observe(nc::top_n_sigma(1.0f)(row, ws));
  std::sort(o.ids.begin(), o.ids.end());
  CHECK(o.ids == std::vector<std::int32_t>{3, 4});
  CHECK(nucleus_cases::observe(nc::top_n_sigma(-1.0f)(row, ws)).ids.size() == 5);
  std::vector<float> flat(10, 3.0f);  // sigma 0: everything is at the maximum
  CHECK(nucleus_cases::observe(nc::top_n_sigma(1.0f)(flat, ws)).ids.size() == 10);
  CHECK_THROWS_AS(nc::top_n_sigma(ref::nan), std::invalid_argument);
}
