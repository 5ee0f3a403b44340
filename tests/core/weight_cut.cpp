// keep_weight_at_least (core/row_stats.hpp), the cut that epsilon, eta and mirostat 2 share: it
// finds its threshold from a narrow band of scaled logits and never tests most candidates' exp. Here
// it must keep exactly what testing every candidate keeps: every logit at or above the least one
// whose exact weight reaches w_min, and the maximum.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <nucleus/core/row_stats.hpp>

#include "kernels/targets.hpp"
#include "reference/cases.hpp"

namespace nc = nucleus;
namespace d = nucleus::detail;
namespace ref = nucleus_ref;

namespace weight_cut_test {  // (named: the unity build joins this file with others)

constexpr float inf = std::numeric_limits<float>::infinity();

// The definition, one candidate at a time: the weights the draw uses, of the same float y.
std::vector<std::int32_t> kept_by_definition(const std::vector<float>& row, float inv, double w_min) {
  float m = -inf;
  for (float v : row) m = v > m ? v : m;
  std::vector<std::int32_t> out;
  if (m == inf) {  // a row holding +inf keeps exactly its +inf tokens (the row's maximum rule)
    for (std::size_t i = 0; i < row.size(); ++i)
      if (row[i] == m) out.push_back(static_cast<std::int32_t>(i));
    return out;
  }
  float cut = m;
  for (float v : row) {
    const float y = d::scaled(v, m, inv);
    if (!(v > -inf) || std::isnan(y)) continue;  // (y is NaN at the maximum when 1/T = inf)
    const double w = static_cast<double>(d::weight(d::exp_scalar(y)));
    if (w >= w_min && v < cut) cut = v;
  }
  for (std::size_t i = 0; i < row.size(); ++i)
    if (row[i] >= cut) out.push_back(static_cast<std::int32_t>(i));
  return out;
}

std::vector<std::int32_t> kept_by_library(const std::vector<float>& row, float inv, double w_min) {
  nc::workspace ws;
  nc::row_state s(std::span<const float>(row), ws);
  s.scale_inv_temperature(inv);
  d::keep_weight_at_least(s, w_min);
  std::vector<std::int32_t> out;
  for (std::size_t i = 0; i < s.size(); ++i) out.push_back(s.id(i));
  std::sort(out.begin(), out.end());
  return out;
}

void check_every_target() {
  nucleus_test::isa_guard guard;
  ref::rng g(0x77C7);
  std::size_t cases = 0, partial = 0;
  for (nc::isa t : nucleus_test::runnable_isas()) {
    REQUIRE(nc::set_isa(t));
    for (int r = 0; r < 300; ++r) {
      const std::size_t n = 1 + g.below(r % 3 == 0 ? 5000 : 300);
      const double sd = g.uniform(0.2, 8.0);
      std::vector<float> row(n);
      for (float& v : row) v = static_cast<float>(sd * g.normal());
      if (r % 4 == 1)  // a grid: many ties, some of them on the cut
        for (float& v : row) v = std::round(v * 8.0f) / 8.0f;
      if (r % 7 == 2)
        for (std::size_t i = 0; i < n; i += 5)
          row[i] = i % 2 ? -inf : std::numeric_limits<float>::quiet_NaN();
      if (r % 29 == 3) row[g.below(n)] = inf;
      const float inv = r % 23 == 4 ? inf : static_cast<float>(g.uniform(0.3, 3.0));
      // The weights of the row's own candidates, so that w_min often falls exactly on one of them.
      float m = -inf;
      for (float v : row) m = v > m ? v : m;
      const float some = row[g.below(n)];
      const double w_at = std::isfinite(some) && std::isfinite(m) && inv < inf
                              ? static_cast<double>(d::weight(d::exp_scalar(d::scaled(some, m, inv))))
                              : 1.0;
      for (double w_min : {w_at, w_at + 1.0, w_at - 1.0, w_at * 0.999, 0.0, -3.0, 0.4, 0x1p48, 0x1p48 + 1.0,
                           0x1p49, std::ldexp(g.uniform(1.0, 2.0), static_cast<int>(g.below(48)))}) {
        INFO("target " << nc::isa_name(t) << " case " << r << " n " << n << " inv " << inv << " w_min "
                       << w_min);
        const std::vector<std::int32_t> want = kept_by_definition(row, inv, w_min);
        CHECK(kept_by_library(row, inv, w_min) == want);
        ++cases;
        partial += !want.empty() && want.size() < n;
      }
    }
  }
  CHECK(partial * 2 > cases);  // most cases cut the row somewhere inside
}

}  // namespace weight_cut_test

TEST_CASE("keep_weight_at_least keeps what testing every candidate's weight keeps", "[core][weight_cut]") {
  weight_cut_test::check_every_target();
}
