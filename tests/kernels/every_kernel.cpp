// Each of the kernels of simd/targets.hpp's table, on every target this build runs, against its
// definition written here as a plain loop (or, for the exp-based ones, against the scalar target bit
// for bit: exp's own accuracy is kernels.cpp's test). Rows of every dtype, awkward lengths (a pack's
// tail, a block's edge), NaN, -inf, ties. Built for aarch64 and run under qemu by tests/kernels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include <nucleus/simd/targets.hpp>

#include "kernels/targets.hpp"

namespace d = nucleus::detail;
using nucleus::isa;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

using nucleus_test::isa_guard;
using nucleus_test::runnable_isas;

template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, nucleus::bf16>) {
    return nucleus::to_bf16(v);
  } else {  // f16 by its bits: the rows hold multiples of 1/64 below 16, all exact normal halves
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return nucleus::f16{0x7e00};
    if (std::isinf(v)) return nucleus::f16{static_cast<std::uint16_t>(sign | 0x7c00)};
    if (v == 0.0f) return nucleus::f16{sign};
    int e = 0;
    const float m = std::frexp(std::fabs(v), &e);  // |v| = m 2^e, m in [0.5, 1)
    const auto mantissa = static_cast<std::uint16_t>((m * 2.0f - 1.0f) * 1024.0f);
    const nucleus::f16 h{static_cast<std::uint16_t>(sign | ((e - 1 + 15) << 10) | mantissa)};
    REQUIRE(nucleus::to_float(h) == v);
    return h;
  }
}

// Row kinds: plain, with NaN and -inf sprinkled, with ties at the top, all -inf.
template <class T>
std::vector<T> make_row(std::size_t n, int kind, std::mt19937& rng) {
  std::uniform_int_distribution<int> q(-640, 640);
  std::vector<float> f(n);
  for (float& v : f) v = static_cast<float>(q(rng)) / 64.0f;
  if (kind == 1)
    for (std::size_t i = 0; i < n; i += 7) f[i] = (i % 2) ? std::numeric_limits<float>::quiet_NaN() : -inf;
  if (kind == 2)  // (every third: at n 4099, more ties than select_top_k's buffer holds for k = 1)
    for (std::size_t i = 1; i < n; i += 3) f[i] = 10.0f;
  if (kind == 3) std::fill(f.begin(), f.end(), -inf);
  std::vector<T> out(n);
  std::transform(f.begin(), f.end(), out.begin(), [](float v) { return from_float<T>(v); });
  return out;
}

// select_top_k under the keep rule (ties_out given), over a run: ties with the k-th all returned
// (what saves collect_ties' pass; must happen), ties dropped with the flag up (the buffer's fallback;
// must happen too, so that it is tested), the flag up without a tie (allowed: it only costs the pass),
// and no tie at all.
struct {
  std::size_t kept = 0, dropped = 0, guessed = 0, none = 0;
} select_ties;

template <class T>
float at(const std::vector<T>& x, std::size_t i) {
  return nucleus::to_float(x[i]);
}

template <class T>
void check_row(const std::vector<T>& x, std::size_t& checked) {
  const std::size_t n = x.size();
  const auto& scalar = d::isa_scalar::table<T>();
  // Plain definitions.
  float max = -inf;
  std::int64_t arg = -1;
  for (std::size_t i = 0; i < n; ++i)
    if (at(x, i) > max) max = at(x, i), arg = static_cast<std::int64_t>(i);
  const float shift = std::isfinite(max) ? max : 0.0f, scale = 0.75f;
  const std::size_t blocks = (n + d::block_elems - 1) / d::block_elems;
  std::vector<std::int32_t> ids(n);
  // Ascending in scan order, as every candidate set the library builds (select_top_k's precondition).
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>(3 * i + 1);

  for (isa t : runnable_isas()) {
    INFO("target " << nucleus::isa_name(t) << ", n " << n);
    REQUIRE(nucleus::set_isa(t));
    const auto& k = d::kernels<T>();
    // max_value, argmax, count_greater
    CHECK(std::bit_cast<std::uint32_t>(k.max_value(x.data(), n)) == std::bit_cast<std::uint32_t>(max));
    const d::argmax_result am = k.argmax(x.data(), n);
    CHECK(am.index == arg);
    if (arg >= 0) CHECK(am.value == max);
    for (float v : {-inf, -1.0f, 0.0f, 3.5f, max}) {
      std::size_t greater = 0;
      for (std::size_t i = 0; i < n; ++i) greater += at(x, i) > v;
      CHECK(k.count_greater(x.data(), n, v) == greater);
    }
    // exp_sum, exp_store, moment_sums, pick: the scalar target's bits.
    std::vector<std::uint64_t> b1(blocks + 1), b0(blocks + 1);
    const d::wsum total = k.exp_sum(x.data(), n, shift, scale, b1.data());
    CHECK(total == scalar.exp_sum(x.data(), n, shift, scale, b0.data()));
    CHECK(std::equal(b1.begin(), b1.begin() + static_cast<std::ptrdiff_t>(blocks), b0.begin()));
    std::vector<float> e1(n + d::compact_slack), e0(n + d::compact_slack);
    k.exp_store(x.data(), n, shift, scale, e1.data());
    scalar.exp_store(x.data(), n, shift, scale, e0.data());
    CHECK(std::equal(e1.begin(), e1.begin() + static_cast<std::ptrdiff_t>(n), e0.begin()));
    const d::moment_totals m1 = k.moment_sums(x.data(), n, shift, scale, e1.data());
    const d::moment_totals m0 = scalar.moment_sums(x.data(), n, shift, scale, e0.data());
    CHECK((m1.total == m0.total && m1.weighted == m0.weighted));
    for (d::wsum point : {d::wsum{0}, total / 3, total / 2, total > 0 ? total - 1 : d::wsum{0}, total}) {
      // the definition: the first index whose running weight sum exceeds the point
      d::wsum run = 0;
      std::int64_t want = -1;
      for (std::size_t i = 0; i < n && want < 0; ++i) {
        run += d::weight(e0[i]);
        if (run > point) want = static_cast<std::int64_t>(i);
      }
      CHECK(k.pick(x.data(), n, shift, scale, b1.data(), point, e1.data()) == want);
    }
    // compact_ge_running: the row's maximum, and a superset in index order of what compact_ge keeps
    // against it, which a compact_ge of the kept cuts to exactly that set.
    for (const float run_scale : {0.75f, 3.0f})
      for (const float threshold : {-2.0f, -0.5f, 0.0f}) {
        std::vector<float> vals(n + d::compact_slack);
        std::vector<std::int32_t> out_ids(n + d::compact_slack);
        float m = 1.0f;
        const std::size_t c =
            k.compact_ge_running(x.data(), n, run_scale, threshold, vals.data(), out_ids.data(), &m);
        CHECK(std::bit_cast<std::uint32_t>(m) == std::bit_cast<std::uint32_t>(max));
        bool in_order = true;
        for (std::size_t j = 0; j < c; ++j)
          in_order = in_order && out_ids[j] >= 0 && static_cast<std::size_t>(out_ids[j]) < n &&
                     (j == 0 || out_ids[j] > out_ids[j - 1]) &&
                     vals[j] == at(x, static_cast<std::size_t>(out_ids[j]));
        CHECK(in_order);
        std::vector<std::int32_t> want;
        for (std::size_t i = 0; i < n; ++i)
          if (d::scaled(at(x, i), max, run_scale) >= threshold) want.push_back(static_cast<std::int32_t>(i));
        const std::size_t c2 = d::kernels<float>().compact_ge(vals.data(), out_ids.data(), c, m, run_scale,
                                                              threshold, vals.data(), out_ids.data());
        CHECK((c2 == want.size() && std::equal(want.begin(), want.end(), out_ids.begin())));
        if (n >= 1024) CHECK(c <= c2 + n / 8);  // a filter that settles early, not the whole row
      }
    // compact_ge: the scaled logits at or above a threshold, in order, with their ids.
    for (float threshold : {-inf, -2.0f, 0.0f}) {
      std::vector<float> vals(n + d::compact_slack);
      std::vector<std::int32_t> out_ids(n + d::compact_slack);
      const std::size_t c =
          k.compact_ge(x.data(), ids.data(), n, shift, scale, threshold, vals.data(), out_ids.data());
      std::size_t j = 0;
      bool same = true;
      for (std::size_t i = 0; i < n; ++i)
        if (d::scaled(at(x, i), shift, scale) >= threshold) {
          same = same && j < c && out_ids[j] == ids[i] && vals[j] == at(x, i);
          ++j;
        }
      CHECK((same && c == j));
    }
    // select_top_k: the k best by (value desc, id asc), NaN and -inf never.
    std::vector<std::uint64_t> all;
    for (std::size_t i = 0; i < n; ++i)
      if (at(x, i) > -inf) all.push_back(d::rank_key(at(x, i), ids[i]));
    std::sort(all.rbegin(), all.rend());  // a larger key ranks first
    for (std::size_t want_k : {std::size_t{1}, std::size_t{5}, std::size_t{64}, n}) {
      std::vector<std::uint64_t> keys(d::select_capacity(want_k));
      const std::size_t expect = std::min(want_k, all.size());
      // the keep set: the k best and every candidate tied with the k-th
      std::size_t with_ties = expect;
      while (expect == want_k && expect > 0 && with_ties < all.size() &&
             d::key_value(all[with_ties]) == d::key_value(all[expect - 1]))
        ++with_ties;
      bool maybe_ties = true;
      const std::size_t c = k.select_top_k(x.data(), ids.data(), n, want_k, keys.data(), &maybe_ties);
      // flag down: the whole keep set; up: exactly the k best (collect_ties adds the rest)
      const std::size_t want_c = maybe_ties ? expect : with_ties;
      CHECK(c == want_c);
      CHECK(std::equal(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(std::min(c, want_c)),
                       all.begin()));
      if (expect > 0)
        (with_ties > expect ? (maybe_ties ? select_ties.dropped : select_ties.kept)
                            : (maybe_ties ? select_ties.guessed : select_ties.none)) += 1;
      // without the keep rule: exactly the k best
      const std::size_t c1 = k.select_top_k(x.data(), ids.data(), n, want_k, keys.data(), nullptr);
      CHECK((c1 == expect &&
             std::equal(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(c1), all.begin())));
      // ids == nullptr: the id is the index
      const std::size_t c2 = k.select_top_k(x.data(), nullptr, n, want_k, keys.data(), nullptr);
      bool same = c2 == c1;
      for (std::size_t j = 0; same && j < c2; ++j)
        same =
            d::key_value(keys[j]) == d::key_value(all[j]) && 3 * d::key_id(keys[j]) + 1 == d::key_id(all[j]);
      CHECK(same);
    }
    // collect_ties: the ids holding v that rank after `after`, in index order.
    if (arg >= 0) {
      const std::uint64_t after = d::rank_key(max, ids[static_cast<std::size_t>(arg)]);
      std::vector<std::uint64_t> keys(n + 1), want;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t key = d::rank_key(max, ids[i]);
        if (at(x, i) == max && key < after) want.push_back(key);
      }
      const std::size_t c = k.collect_ties(x.data(), ids.data(), n, max, after, keys.data(), 0, n + 1);
      CHECK((c == want.size() && std::equal(want.begin(), want.end(), keys.begin())));
    }
    // collect_bin: lo <= (x - shift) * scale * unit < hi.
    {
      const float unit = -16.0f, lo = 8.0f, hi = 40.0f;
      std::vector<std::uint64_t> keys(n + d::compact_slack), want;
      for (std::size_t i = 0; i < n; ++i) {
        const float b = d::scaled(at(x, i), shift, scale) * unit;
        if (b >= lo && hi > b) want.push_back(d::rank_key(at(x, i), ids[i]));
      }
      const std::size_t c = k.collect_bin(x.data(), ids.data(), n, shift, scale, unit, lo, hi, keys.data());
      CHECK((c == want.size() && std::equal(want.begin(), want.end(), keys.begin())));
    }
    // mass_histogram: the weight of exp_scalar(y) into bin trunc(y * unit), from the lump bin on (or
    // NaN) the lump bin; into masses that already hold something; the count of logits below the lump.
    for (std::uint32_t lump :
         {static_cast<std::uint32_t>(d::hist_bins - 1), std::uint32_t{40}, std::uint32_t{0}}) {
      const float unit = -32.0f;
      std::vector<d::wsum> mass(d::hist_bins, d::wsum{7}), want(d::hist_bins, d::wsum{7});
      std::size_t own = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float y = d::scaled(at(x, i), shift, scale);
        const float b = y * unit;
        const bool mine = b < static_cast<float>(lump);
        own += mine;
        want[mine ? static_cast<std::size_t>(b) : lump] += d::weight(d::exp_scalar(y));
      }
      CHECK(k.mass_histogram(x.data(), n, shift, scale, unit, lump, mass.data()) == own);
      CHECK(mass == want);
    }
    // exp_sum_in, pick_in: as exp_sum and pick with every logit outside [lo, hi] weighing 0.
    for (const auto [lo, hi] : {std::pair{-std::numeric_limits<float>::max(), inf}, std::pair{-1.5f, 0.25f},
                                std::pair{0.0f, 0.0f}, std::pair{-0.5f, inf}}) {
      std::vector<std::uint64_t> bw(blocks + 1);
      d::wsum want_total = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float v = at(x, i);
        if (v >= lo && v <= hi) want_total += d::weight(e0[i]);
      }
      const d::wsum got = k.exp_sum_in(x.data(), n, shift, scale, lo, hi, bw.data());
      CHECK(got == want_total);
      for (d::wsum point : {d::wsum{0}, got / 3, got > 0 ? got - 1 : d::wsum{0}, got}) {
        d::wsum run = 0;
        std::int64_t want = -1;
        for (std::size_t i = 0; i < n && want < 0; ++i) {
          const float v = at(x, i);
          run += v >= lo && v <= hi ? d::weight(e0[i]) : 0;
          if (run > point) want = static_cast<std::int64_t>(i);
        }
        CHECK(k.pick_in(x.data(), n, shift, scale, lo, hi, bw.data(), point, e1.data()) == want);
        // ... and the same from stored exp values (exp_sum_store's), without an exp.
        std::vector<std::uint64_t> bc(blocks + 1);
        CHECK(k.cached_sum_in(x.data(), e0.data(), n, lo, hi, bc.data()) == got);
        CHECK(std::equal(bw.begin(), bw.begin() + static_cast<std::ptrdiff_t>(blocks), bc.begin()));
        CHECK(k.cached_pick_in(x.data(), e0.data(), n, lo, hi, bc.data(), point) == want);
      }
    }
    // exp_sum_store: exp_sum's total and exp_store's values in one pass.
    {
      std::vector<float> es(n + d::compact_slack);
      CHECK(k.exp_sum_store(x.data(), n, shift, scale, es.data()) == total);
      CHECK(std::equal(es.begin(), es.begin() + static_cast<std::ptrdiff_t>(n), e0.begin()));
    }
    // cached_band: the weight of the logits whose float bin value lies below lo, and the rank keys
    // (id = index) of those in [lo, hi), in order, at most cap of them, all counted.
    for (const auto [lo, hi] : {std::pair{0.0f, 1.0f}, std::pair{3.0f, 40.0f}, std::pair{0.0f, inf}}) {
      const float unit = -32.0f;
      d::wsum want_before = 0;
      std::vector<std::uint64_t> want;
      for (std::size_t i = 0; i < n; ++i) {
        const float b = d::scaled(at(x, i), shift, scale) * unit;
        if (b < lo) want_before += d::weight(e0[i]);
        if (b >= lo && b < hi) want.push_back(d::rank_key(at(x, i), static_cast<std::int32_t>(i)));
      }
      for (std::size_t cap : {n, std::size_t{2}}) {
        std::vector<std::uint64_t> keys(n + 1), blocks_out(blocks + 1);
        d::wsum before = 0;
        const std::size_t m = k.cached_band(x.data(), e0.data(), n, shift, scale, unit, lo, hi, keys.data(),
                                            cap, &before, blocks_out.data());
        CHECK(before == want_before);
        CHECK(m == want.size());
        for (std::size_t bi = 0; bi < blocks; ++bi) {  // each block's weight before the band
          d::wsum wb = 0;
          for (std::size_t i = bi * d::block_elems; i < std::min(n, (bi + 1) * d::block_elems); ++i)
            if (d::scaled(at(x, i), shift, scale) * unit < lo) wb += d::weight(e0[i]);
          CHECK(blocks_out[bi] == wb);
        }
        const std::size_t kept = std::min(m, cap);
        CHECK(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(kept), keys.begin()));
      }
    }
    // cached_ring: the weight of the logits whose scaled value lies in [in_lo, in_hi], per block too,
    // and the indices of those in [out_lo, out_hi] but not inside, in order, at most cap, all counted.
    for (const d::ring_bounds r :
         {d::ring_bounds{-9.0f, -6.0f, -2.0f, -1.0f}, d::ring_bounds{-15.5f, -3.75f, -3.75f, 0.0f},
          d::ring_bounds{-8.0f, -3.0f, -4.0f, -2.0f}, d::ring_bounds{-inf, -0.75f, 0.0f, 0.0f}}) {
      d::wsum want_inside = 0;
      std::vector<std::uint64_t> want;
      std::vector<d::wsum> want_blocks(blocks, 0);
      for (std::size_t i = 0; i < n; ++i) {
        const float y = d::scaled(at(x, i), shift, scale);
        if (y >= r.in_lo && y <= r.in_hi) {
          want_inside += d::weight(e0[i]);
          want_blocks[i / d::block_elems] += d::weight(e0[i]);
        } else if (y >= r.out_lo && y <= r.out_hi) {
          want.push_back(i);
        }
      }
      for (std::size_t cap : {n, std::size_t{2}}) {
        std::vector<std::uint64_t> members(n + 1), blocks_out(blocks + 1);
        d::wsum inside = 0;
        const std::size_t m = k.cached_ring(x.data(), e0.data(), n, shift, scale, r, members.data(), cap,
                                            &inside, blocks_out.data());
        CHECK(inside == want_inside);
        CHECK(m == want.size());
        for (std::size_t bi = 0; bi < blocks; ++bi) CHECK(blocks_out[bi] == want_blocks[bi]);
        const std::size_t kept = std::min(m, cap);
        CHECK(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(kept), members.begin()));
      }
    }
    // candidate_sums, candidate_squares: eight partial sums in double, logit i into sum i % 8 in
    // index order, -inf and NaN adding nothing.
    {
      constexpr std::size_t ways = d::partial_sums;
      double want_sum[ways] = {}, want_sq[ways] = {}, got_sum[ways], got_sq[ways];
      std::size_t want_count = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (at(x, i) > -inf) {
          want_sum[i % ways] += static_cast<double>(at(x, i));
          ++want_count;
        }
      const double center = want_count ? want_sum[0] / static_cast<double>(want_count) : 0.0;
      for (std::size_t i = 0; i < n; ++i)
        if (at(x, i) > -inf) {
          const double dv = static_cast<double>(at(x, i)) - center;
          want_sq[i % ways] = std::fma(dv, dv, want_sq[i % ways]);
        }
      CHECK(k.candidate_sums(x.data(), n, got_sum) == want_count);
      k.candidate_squares(x.data(), n, center, got_sq);
      bool same = true;
      for (std::size_t j = 0; j < ways; ++j)
        same = same &&
               std::bit_cast<std::uint64_t>(got_sum[j]) == std::bit_cast<std::uint64_t>(want_sum[j]) &&
               std::bit_cast<std::uint64_t>(got_sq[j]) == std::bit_cast<std::uint64_t>(want_sq[j]);
      CHECK(same);
    }
    // masked_widen: x where the bit is set, -inf elsewhere.
    {
      std::vector<std::uint32_t> mask((n + 31) / 32);
      for (std::size_t w = 0; w < mask.size(); ++w)
        mask[w] = static_cast<std::uint32_t>(0x9e3779b9u * (w + 1));
      std::vector<float> out(n);
      k.masked_widen(x.data(), n, mask.data(), out.data());
      bool same = true;
      for (std::size_t i = 0; i < n; ++i) {
        const float want = (mask[i / 32] >> (i % 32)) & 1u ? at(x, i) : -inf;
        same = same && std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(want);
      }
      CHECK(same);
    }
    // log_softmax_store: (x - max) - lse, NaN -> -inf.
    {
      const float lse = 1.25f;
      std::vector<float> out(n);
      k.log_softmax_store(x.data(), n, shift, lse, out.data());
      bool same = true;
      for (std::size_t i = 0; i < n; ++i) {
        const float want = std::isnan(at(x, i)) ? -inf : (at(x, i) - shift) - lse;
        same = same && std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(want);
      }
      CHECK(same);
    }
    ++checked;
  }
}

template <class T>
std::size_t run_all() {
  isa_guard g;
  std::mt19937 rng(20261205);
  std::size_t checked = 0;
  select_ties = {};
  for (std::size_t n : {1, 3, 15, 16, 17, 63, 65, 1023, 1024, 1025, 2049, 4099})
    for (int kind = 0; kind < 4; ++kind) check_row(make_row<T>(n, kind, rng), checked);
  INFO("select_top_k's keep rule: ties kept in "
       << select_ties.kept << " rows, dropped (flag up) in " << select_ties.dropped
       << ", flag up without one in " << select_ties.guessed << ", no tie in " << select_ties.none);
  CHECK((select_ties.kept > 0 && select_ties.dropped > 0 && select_ties.none > 0));
  return checked;
}

}  // namespace

TEST_CASE("every kernel on every target equals its definition: float rows", "[kernels]") {
  CHECK(run_all<float>() == 48 * runnable_isas().size());
}
TEST_CASE("every kernel on every target equals its definition: bf16 rows", "[kernels]") {
  CHECK(run_all<nucleus::bf16>() == 48 * runnable_isas().size());
}
TEST_CASE("every kernel on every target equals its definition: f16 rows", "[kernels]") {
  CHECK(run_all<nucleus::f16>() == 48 * runnable_isas().size());
}
// A row whose first 16,384 logits (all that select_top_k's priming reads) are low, then ascending
// values 16 to a value: every later logit enters the buffer, which fills and shrinks again and again
// within the scan, each time with 15 ties of the k-th to keep (the rows above never fill it so).
template <class T>
void check_keep_through_shrinks() {
  isa_guard g;
  const std::size_t n = 16384 + 3616;
  std::vector<T> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = from_float<T>(i < 16384 ? -10.0f - static_cast<float>(i % 128)
                                   : static_cast<float>((i - 16384) / 16));
  std::vector<std::uint64_t> all;
  for (std::size_t i = 0; i < n; ++i) all.push_back(d::rank_key(at(x, i), static_cast<std::int32_t>(i)));
  std::sort(all.rbegin(), all.rend());
  for (std::size_t want_k : {std::size_t{5}, std::size_t{64}, std::size_t{300}}) {
    REQUIRE(n - 16384 > d::select_capacity(want_k));  // the scan must shrink
    std::size_t with_ties = want_k;
    while (d::key_value(all[with_ties]) == d::key_value(all[want_k - 1])) ++with_ties;
    for (isa t : runnable_isas()) {
      INFO("target " << nucleus::isa_name(t) << ", k " << want_k);
      REQUIRE(nucleus::set_isa(t));
      std::vector<std::uint64_t> keys(d::select_capacity(want_k));
      bool maybe_ties = true;
      const std::size_t c =
          d::kernels<T>().select_top_k(x.data(), nullptr, n, want_k, keys.data(), &maybe_ties);
      CHECK(!maybe_ties);
      CHECK((c == with_ties &&
             std::equal(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(c), all.begin())));
    }
  }
}

TEST_CASE("select_top_k keeps the k-th's ties through the shrinks within its scan", "[kernels]") {
  check_keep_through_shrinks<float>();
  check_keep_through_shrinks<nucleus::bf16>();
  check_keep_through_shrinks<nucleus::f16>();
}

TEST_CASE("mass_histogram's bins add past 64 bits over rows longer than its runs", "[kernels]") {
  isa_guard g;
  // 100,003 logits: most at the maximum (each weighs 2^48, together more than 2^64), a few spread.
  std::vector<float> x(100003, 0.0f);
  for (std::size_t i = 0; i < x.size(); i += 97) x[i] = -static_cast<float>(i % 400) / 8.0f;
  const float unit = -32.0f, scale = 0.5f;
  std::vector<d::wsum> want(d::hist_bins);
  for (float v : x) {
    const float y = d::scaled(v, 0.0f, scale);
    const float b = y * unit;
    want[b <= static_cast<float>(d::hist_bins - 1) ? static_cast<std::size_t>(b) : d::hist_bins - 1] +=
        d::weight(d::exp_scalar(y));
  }
  REQUIRE(want[0] > d::wsum{~std::uint64_t{0}});
  for (isa t : runnable_isas()) {
    INFO("target " << nucleus::isa_name(t));
    REQUIRE(nucleus::set_isa(t));
    std::vector<d::wsum> mass(d::hist_bins);
    d::kernels<float>().mass_histogram(x.data(), x.size(), 0.0f, scale, unit,
                                       static_cast<std::uint32_t>(d::hist_bins - 1), mass.data());
    CHECK(mass == want);
  }
}
