// nucleus's exp against std::exp in double, and the pack and scalar paths against each other.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <nucleus/simd/exp.hpp>

namespace d = nucleus::detail;

namespace {
// Distance in units in the last place of the float nearest the exact value.
double ulps(float got, double exact) {
  const float ef = static_cast<float>(exact);
  const float next = std::nextafter(ef, std::numeric_limits<float>::infinity());
  return std::abs(static_cast<double>(got) - exact) / (static_cast<double>(next) - static_cast<double>(ef));
}
}  // namespace

TEST_CASE("exp is within 2 ulp on (-86, 0] and pack equals scalar bit for bit") {
  std::vector<float> ys;
  for (float y = -85.999f; y <= 0.0f; y += 0.000731f) ys.push_back(y);
  for (float y : {-0.0f, 0.0f, -1e-30f, -1e-7f, -0.5f, -0.34657f, -0.34658f, -85.99f, -85.9999f})
    ys.push_back(y);
  while (ys.size() % d::lanes) ys.push_back(-1.0f);
  double worst = 0.0;
  std::vector<float> packed(ys.size());
  for (std::size_t i = 0; i < ys.size(); i += d::lanes)
    d::store(packed.data() + i, d::exp(d::load(ys.data() + i)));
  for (std::size_t i = 0; i < ys.size(); ++i) {
    const float s = d::exp(ys[i]);
    REQUIRE(std::bit_cast<std::uint32_t>(s) == std::bit_cast<std::uint32_t>(packed[i]));
    if (ys[i] > -86.0f) worst = std::max(worst, ulps(s, std::exp(static_cast<double>(ys[i]))));
  }
  INFO("worst error " << worst << " ulp over " << ys.size() << " arguments");
  CHECK(worst <= 2.0);
}

TEST_CASE("exp gives 0 for -inf, NaN and arguments at or below -86") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float y : {-std::numeric_limits<float>::infinity(), nan, -86.0f, -87.0f, -100.0f, -1e30f}) {
    CHECK(d::exp(y) == 0.0f);
    const d::fpack p = d::exp(d::splat(y));
    const d::lane_array a = d::to_lanes(p);
    for (float v : a.v) CHECK(v == 0.0f);
  }
  CHECK(d::exp(0.0f) == 1.0f);
}

TEST_CASE("fold_sum adds lanes pairwise by halves") {
  d::lane_array a{};
  for (std::size_t l = 0; l < d::lanes; ++l) a.v[l] = l == 0 ? 1.0f : 1e-8f;
  // a left-to-right sum would lose every 1e-8 against 1; the halving tree first adds them together
  float expect[d::lanes];
  for (std::size_t l = 0; l < d::lanes; ++l) expect[l] = a.v[l];
  for (std::size_t h = d::lanes / 2; h > 0; h /= 2)
    for (std::size_t l = 0; l < h; ++l) expect[l] = expect[l] + expect[l + h];
  CHECK(d::fold_sum(d::load(a.v)) == expect[0]);
}
