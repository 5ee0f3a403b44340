// The kernels on every target this CPU runs: exp against std::exp in double, each target against the
// scalar exp bit for bit (so the exact FMA of every target, emulated on SSE2, is checked too), the
// exact weight sums against a double reference, and the moments' sums against their definition.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <nucleus/core/row_stats.hpp>
#include <nucleus/simd/targets.hpp>

#include "kernels/targets.hpp"

namespace d = nucleus::detail;
using nucleus::isa;

namespace {

// Distance in units in the last place of the float nearest the exact value.
double ulps(float got, double exact) {
  const float ef = static_cast<float>(exact);
  const float next = std::nextafter(ef, std::numeric_limits<float>::infinity());
  return std::abs(static_cast<double>(got) - exact) / (static_cast<double>(next) - static_cast<double>(ef));
}

using nucleus_test::isa_guard;
using nucleus_test::runnable_isas;

}  // namespace

TEST_CASE("the dispatcher runs the target it is set to, and refuses unknown ones") {
  isa_guard g;
  for (isa t : runnable_isas()) {
    CHECK(nucleus::set_isa(t));
    CHECK(nucleus::active_isa() == t);
  }
  CHECK(nucleus::isa_supported(isa::scalar));
  CHECK(nucleus::parse_isa("avx2") == isa::avx2);
  CHECK(!nucleus::parse_isa("avx3"));
}

TEST_CASE("exp is within 2 ulp on (-86, 0] and every target equals the scalar exp bit for bit") {
  isa_guard g;
  std::vector<float> ys;
  for (float y = -85.999f; y <= 0.0f; y += 0.000731f) ys.push_back(y);
  for (float y : {-0.0f, 0.0f, -1e-30f, -1e-7f, -0.5f, -0.34657f, -0.34658f, -85.99f, -85.9999f})
    ys.push_back(y);
  double worst = 0.0;
  for (float y : ys)
    if (y > -86.0f) worst = std::max(worst, ulps(d::exp_scalar(y), std::exp(static_cast<double>(y))));
  INFO("worst error " << worst << " ulp over " << ys.size() << " arguments");
  CHECK(worst <= 2.0);
  for (isa t : runnable_isas()) {
    INFO("target " << nucleus::isa_name(t));
    nucleus::set_isa(t);
    std::vector<float> packed(ys.size());
    d::exp_store(ys.data(), ys.size(), 0.0f, 1.0f, packed.data());
    std::size_t diff = 0;
    for (std::size_t i = 0; i < ys.size(); ++i)
      diff += std::bit_cast<std::uint32_t>(d::exp_scalar(ys[i])) != std::bit_cast<std::uint32_t>(packed[i]);
    CHECK(diff == 0);
  }
}

TEST_CASE("exp gives 0 for -inf, NaN and arguments at or below -86") {
  isa_guard g;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> ys = {
      -std::numeric_limits<float>::infinity(), nan, -86.0f, -87.0f, -100.0f, -1e30f};
  for (float y : ys) CHECK(d::exp_scalar(y) == 0.0f);
  CHECK(d::exp_scalar(0.0f) == 1.0f);
  for (isa t : runnable_isas()) {
    nucleus::set_isa(t);
    std::vector<float> row(128, 0.0f);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = ys[i % ys.size()];
    std::vector<float> out(row.size(), 1.0f);
    d::exp_store(row.data(), row.size(), 0.0f, 1.0f, out.data());
    for (float v : out) CHECK(v == 0.0f);
  }
}

TEST_CASE("a weight is floor(e * 2^48), and exp_sum adds them exactly on every target") {
  isa_guard g;
  CHECK(d::weight(1.0f) == (std::uint64_t{1} << 48));
  CHECK(d::weight(0.0f) == 0);
  CHECK(d::weight(0x1p-48f) == 1);
  CHECK(d::weight(0x1.fffffep-49f) == 0);
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (std::size_t n : {1u, 63u, 64u, 65u, 1023u, 1024u, 1025u, 5000u, 151936u}) {
    std::vector<float> row(n);
    for (float& x : row) x = nd(gen);
    const float m = d::max_value(row.data(), n);
    // Independent reference: the exact sum of the per-token weights in 128-bit integers, and the
    // real sum in double, which the weights may undercount by less than 2^-48 per token.
    d::wsum ref = 0;
    double real = 0.0;
    for (float x : row) {
      const double e = std::exp(static_cast<double>(x - m) * 0.7);
      real += e;
      ref += d::weight(d::exp_scalar(d::scaled(x, m, 0.7f)));
    }
    INFO("n = " << n);
    CHECK(std::abs(d::to_double(ref) - real) <= 4e-7 * real);
    std::vector<std::uint64_t> blocks(n / d::block_elems + 1);
    for (isa t : runnable_isas()) {
      INFO("target " << nucleus::isa_name(t));
      nucleus::set_isa(t);
      CHECK(d::exp_sum(row.data(), n, m, 0.7f, blocks.data()) == ref);
      d::wsum from_blocks = 0;
      for (std::size_t b = 0; b * d::block_elems < n; ++b) from_blocks += blocks[b];
      CHECK(from_blocks == ref);
    }
  }
}

TEST_CASE("mass_bound is the exact ceiling of p * total") {
  for (float p : {1.0f, 0.9f, 0.5f, 1e-3f, 1e-30f, 0x1p-149f})
    for (d::wsum total : {d::wsum{1}, d::wsum{3}, d::wsum{1} << 38, (d::wsum{1} << 38) + 12345}) {
      const d::wsum t = d::mass_bound(p, total);
      // m < T <=> m < p * total, checked at m = T - 1 and m = T with long double where it is exact
      const long double pt = static_cast<long double>(p) * static_cast<long double>(total);
      if (t > 0) CHECK(static_cast<long double>(t - 1) < pt);
      CHECK(!(static_cast<long double>(t) < pt));
    }
}

TEST_CASE("moment_sums adds the weights and w * trunc(-y 2^40) exactly on every target") {
  isa_guard g;
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.0f, 5.0f);
  for (std::size_t n : {1u, 63u, 64u, 65u, 1023u, 1024u, 1090u, 5000u, 151936u})
    for (float scale : {1.0f, 0.37f, 3.0f}) {
      std::vector<float> row(n);
      for (float& x : row) x = nd(gen);
      // The hard cases: -inf and NaN (weight 0), ties at the maximum, logits a hair below it (y near
      // 0, where trunc drops bits), and a tail far below -86 after scaling.
      for (std::size_t i = 3; i < n; i += 17) row[i] = -inf;
      for (std::size_t i = 5; i < n; i += 97) row[i] = std::numeric_limits<float>::quiet_NaN();
      for (std::size_t i = 9; i < n; i += 31) row[i] = 20.0f;
      for (std::size_t i = 11; i < n; i += 53) row[i] = std::nextafter(20.0f, 0.0f);
      for (std::size_t i = 13; i < n; i += 41) row[i] = -90.0f;
      const float m = d::max_value(row.data(), n);
      // Independent reference: the definition, token by token, in 128-bit integers; and the mean
      // scaled logit under the distribution in double, which the 2^-40 fixed point must approach.
      d::wsum total = 0, weighted = 0;
      double z = 0.0, zy = 0.0;
      for (float x : row) {
        const float y = d::scaled(x, m, scale);
        const std::uint64_t w = d::weight(d::exp_scalar(y));
        if (w == 0) continue;
        total += w;
        weighted += static_cast<d::wsum>(w) * static_cast<std::uint64_t>(-static_cast<double>(y) * 0x1p40);
        const double e = std::exp(static_cast<double>(y));
        z += e;
        zy += e * static_cast<double>(y);
      }
      const double mean = -static_cast<double>(weighted) / static_cast<double>(total) * 0x1p-40;
      INFO("n = " << n << ", scale = " << scale);
      CHECK(std::abs(mean - zy / z) <= 1e-6 * (1.0 + std::abs(zy / z)));
      for (isa t : runnable_isas()) {
        INFO("target " << nucleus::isa_name(t));
        nucleus::set_isa(t);
        std::vector<float> out(n, -1.0f);
        const d::moment_totals k = d::moment_sums(row.data(), n, m, scale, out.data());
        // The exp values, whole packs and the last partial one alike.
        std::size_t exp_diff = 0;
        for (std::size_t i = 0; i < n; ++i)
          exp_diff += std::bit_cast<std::uint32_t>(d::exp_scalar(d::scaled(row[i], m, scale))) !=
                      std::bit_cast<std::uint32_t>(out[i]);
        CHECK(exp_diff == 0);
        CHECK(k.total == total);
        CHECK(k.weighted == weighted);
        // row_stats' moments, through a row_state: the same integers, the mean from them.
        nucleus::workspace ws;
        nucleus::row_state s(std::span<const float>(row), ws);
        s.scale_inv_temperature(scale);
        const d::row_moments mo = d::moments(s);
        CHECK(mo.total == total);
        CHECK(mo.mean_y == std::ldexp(-static_cast<double>(weighted) / static_cast<double>(total), -40));
      }
    }
}
