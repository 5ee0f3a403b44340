// typical(p, min_keep = 1): locally typical sampling (Meister et al.; llama.cpp's and Hugging Face's
// typical_p). Tokens are ranked by how far their surprise -log p lies from the entropy H, nearest
// first, and kept while the probability of the tokens before them is < p (the token that crosses p
// is kept), and at least the first min_keep in that order (as both engines apply min_keep).
//
// -log p_i - H = E[y] - y_i for the scaled logits y = (x - max) / T, so the ranking is the distance of
// y_i from its mean under the distribution (core/row_stats.hpp): no log, and exact sums. Ties in
// distance go to the higher logit, then the lower id.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

namespace detail {
inline constexpr double typical_bins_per_unit = 32.0;  // histogram resolution in distance units (nats)
inline constexpr std::size_t typical_band_min = 512;   // fewer candidates: the exact histogram only
inline constexpr std::size_t typical_ring_subs = 64;   // a ring's sub-bins at least (one per 8 members)

// The ranking key: the distance of a scaled logit y from the mean, float y in double arithmetic.
inline double typical_distance(float y, double mean) noexcept {
  return std::fabs(static_cast<double>(y) - mean);
}

// The first float at or after `lo`, up to `hi` (in the float order, as ordered() keys), where a
// predicate that is false then true becomes true; hi if it never does before.
template <class Pred>
float first_float(std::uint32_t lo, std::uint32_t hi, Pred&& pred) noexcept {
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (pred(from_ordered(mid))) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return from_ordered(lo);
}

// The scaled logits y <= 0 whose distance is below d: a float range [lo, hi] (empty when lo > hi).
// The distance only grows away from the mean on either side (a rounded difference is monotone), so
// the range is exact: every float y in it is below d, every other float is not.
struct y_range {
  float lo, hi;
};
inline y_range within_distance(double mean, double d) noexcept {
  const std::uint32_t bottom = ordered(-inf()), top = ordered(0.0f);
  auto near = [&](float y) { return typical_distance(y, mean) < d; };
  // Going up from -inf: "above the mean or near it" turns true at the range's low end and stays true;
  // "below the mean or near it" turns false just past its high end.
  auto from_low = [&](float y) { return static_cast<double>(y) > mean || near(y); };
  auto to_high = [&](float y) { return static_cast<double>(y) < mean || near(y); };
  const float lo = first_float(bottom, top, from_low);
  if (!from_low(lo)) return {1.0f, 0.0f};  // no y <= 0 qualifies
  const float past = first_float(bottom, top, [&](float y) { return !to_high(y); });
  return {lo, to_high(past) ? past : std::nextafter(past, -inf())};
}

// The logits v <= shift whose scaled value (v - shift) * scale lies in [y.lo, y.hi] (y.lo <= y.hi): a
// logit window [lo, hi], exact as above (the scaled value only grows with v).
inline y_range logit_window(y_range y, float shift, float scale) noexcept {
  const std::uint32_t bottom = ordered(-std::numeric_limits<float>::max()), top = ordered(shift);
  const float lo = first_float(bottom, top, [&](float v) { return scaled(v, shift, scale) >= y.lo; });
  float hi = shift;
  if (scaled(shift, shift, scale) > y.hi)
    hi = std::nextafter(first_float(bottom, top, [&](float v) { return scaled(v, shift, scale) > y.hi; }),
                        -inf());
  return {lo, hi};
}

// Where the cut probably lies: a ring of distances [lo, hi) from an estimate of the mass per distance
// bin, made from the exact weights e (moments'): every candidate that weighs at least 1/1024 of the
// total exactly (few; a sample would miss them), and the rest from every 16th run of 64 candidates, 16
// times over. The ring spans three standard deviations of the sample's error either side of the cut
// (sampling each light candidate with probability 1/16 adds 15 e^2 to the variance), and a bin more.
struct distance_ring {
  double lo, hi;
};
template <class X>
distance_ring typical_estimate(row_state& s, const X* x, const float* e, std::size_t n, float shift,
                               float scale, double mean, wsum total, float p) noexcept {
  constexpr std::uint32_t bins_n = 1024, last = bins_n - 1;
  double mass[bins_n] = {}, square[bins_n] = {};
  auto bin = [&](float v) {
    const double b = typical_distance(scaled(v, shift, scale), mean) * typical_bins_per_unit;
    return b < static_cast<double>(last) ? static_cast<std::uint32_t>(b) : last;
  };
  const double heavy = to_double(total) / 1024.0;
  for_each_exp_at_least(s, heavy, [&](float v, std::size_t i) { mass[bin(v)] += static_cast<double>(e[i]); });
  for (std::size_t i0 = 0; i0 < n; i0 += 16 * 64) {
    const std::size_t end = n - i0 < 64 ? n : i0 + 64;
    for (std::size_t i = i0; i < end; ++i) {
      const auto w = static_cast<double>(e[i]);
      if (!(w < heavy) || !(w > 0.0)) continue;
      const std::uint32_t b = bin(to_float(x[i]));
      mass[b] += 16.0 * w;
      square[b] += 16.0 * w * w;
    }
  }
  double sampled = 0.0, squares = 0.0;
  for (std::uint32_t b = 0; b < bins_n; ++b) {
    sampled += mass[b];
    squares += square[b];
  }
  const double target = static_cast<double>(p) * sampled, q = static_cast<double>(p);
  // The cut's bin, and the squares before it: the error of (mass before) - p (total).
  double run = 0.0, near = 0.0;
  std::uint32_t cut = 0;
  while (cut < last && run + mass[cut] < target) {
    run += mass[cut];
    near += square[cut++];
  }
  const double sigma = std::sqrt(15.0 * ((1.0 - q) * (1.0 - q) * near + q * q * (squares - near)));
  std::uint32_t lo = 0, hi = 0;
  run = 0.0;
  while (lo < last && run + mass[lo] < target - 3.0 * sigma) run += mass[lo++];
  hi = lo;
  while (hi < last && run + mass[hi] < target + 3.0 * sigma) {
    run += mass[hi];
    ++hi;
  }
  return {lo > 0 ? (lo - 1) / typical_bins_per_unit : 0.0, (hi + 2) / typical_bins_per_unit};
}

// The exact cut, found in a ring of distances [lo, hi) around the estimate: one memory pass
// (cached_ring) gives the mass inside lo and the ring's members; a cut outside the ring moves it (a
// few times at most). Only the ring's members are ranked: sub-bins on the exact distance, then a sort
// of the one that holds the cut. The kept set is then a logit window (the distance falls toward the
// mean on both sides), left pending on a dense row with the draw's weights lent; tokens tied with
// the cut in distance but ranked after it, inside the window, are dropped by name. Returns false
// when no ring held the cut (the caller runs the exact histogram).
inline bool typical_banded(row_state& s, float p, float mx, std::uint32_t start_bin) {
  const float inv = s.inv_temperature();
  const row_moments mo = moments(s);  // leaves exp(y) in ws.probs
  const wsum bound = mass_bound(p, mo.total);
  const std::size_t n = s.size();
  workspace& ws = s.ws();
  const float* e = ws.probs.data();
  const double mean = mo.mean_y;
  std::uint64_t* members = ws.keys.ensure(n);
  std::uint64_t* blocks = ws.blocks.data();
  return s.visit([&](const auto* x) {
    auto y_of = [&](std::uint64_t i) { return scaled(to_float(x[i]), mx, inv); };
    auto dist = [&](std::uint64_t i) { return typical_distance(y_of(i), mean); };
    const distance_ring start =
        start_bin < hist_bins
            ? distance_ring{start_bin / typical_bins_per_unit, (start_bin + 1) / typical_bins_per_unit}
            : typical_estimate(s, x, e, n, mx, inv, mean, mo.total, p);
    double lo = start.lo, hi = start.hi;
    for (int attempt = 0; attempt < 4; ++attempt) {
      const y_range in = within_distance(mean, lo), out = within_distance(mean, hi);
      wsum inside = 0;
      const std::size_t m = cached_ring(x, e, n, mx, inv, ring_bounds{out.lo, in.lo, in.hi, out.hi}, members,
                                        n, &inside, blocks);
      const double width = hi - lo;
      if (inside >= bound) {  // the cut lies nearer the mean
        if (lo == 0.0) return false;
        hi = lo;
        lo = std::max(0.0, lo - 4.0 * width);
        continue;
      }
      // The ring's sub-bins (monotone in the distance: equal distances share one), the one where the
      // running mass reaches the bound, its members first, sorted: distance, the higher logit, the
      // lower id. Each member's sub-bin rides above its index (32 bits: n < 2^32).
      const std::size_t subs = std::clamp<std::size_t>(m / 8, typical_ring_subs, hist_bins);
      const double per = static_cast<double>(subs) / width;
      wsum* mass = ws.hist_mass.data();
      std::fill(mass, mass + subs, wsum{0});
      for (std::size_t k = 0; k < m; ++k) {
        const std::uint64_t i = members[k];
        const double t = (dist(i) - lo) * per;
        const std::uint64_t b = t < static_cast<double>(subs - 1) ? static_cast<std::uint64_t>(t) : subs - 1;
        mass[b] += weight(e[i]);
        members[k] = i | b << 32;
      }
      wsum ring = 0;
      for (std::size_t b = 0; b < subs; ++b) ring += mass[b];
      if (inside + ring < bound) {  // the cut lies farther out
        lo = hi;
        hi += 4.0 * width;
        continue;
      }
      auto index = [](std::uint64_t k) { return k & 0xFFFFFFFFu; };
      auto sub = [](std::uint64_t k) { return static_cast<std::size_t>(k >> 32); };
      // (the search from the mass inside: the cut's sub-bin exists, as inside + ring reaches the bound)
      const bin_edge cut = find_edge_bin(mass, static_cast<std::uint32_t>(subs), bound - inside);
      wsum before = inside + cut.before;
      const std::size_t at = cut.edge;
      std::size_t front = 0;
      for (std::size_t k = 0; k < m; ++k)
        if (sub(members[k]) == at) std::swap(members[front++], members[k]);
      std::sort(members, members + front, [&](std::uint64_t a, std::uint64_t b) {
        const double da = dist(index(a)), db = dist(index(b));
        if (da != db) return da < db;
        const float va = to_float(x[index(a)]), vb = to_float(x[index(b)]);
        if (va != vb) return va > vb;
        return s.id(index(a)) < s.id(index(b));
      });
      std::size_t taken = 0;
      while (taken < front && before < bound) before += weight(e[index(members[taken++])]);
      // Kept: inside, the cut sub-bin's first `taken`, and every member of an earlier sub-bin. Their
      // scaled logits span [ky.lo, ky.hi]; the draw's weights go into their blocks.
      y_range ky = in;
      bool any = in.lo <= in.hi;
      wsum kept = inside;
      for (std::size_t k = 0; k < m; ++k) {
        if (!(k < taken || (k >= front && sub(members[k]) < at))) continue;
        const std::uint64_t i = index(members[k]);
        const float y = y_of(i);
        ky.lo = any ? std::min(ky.lo, y) : y;
        ky.hi = any ? std::max(ky.hi, y) : y;
        any = true;
        const std::uint64_t w = weight(e[i]);
        blocks[i / block_elems] += w;
        kept += w;
      }
      // Members left out whose scaled logit lies in the window: ties of the cut ranked after it (only
      // in the cut's sub-bin: those of a later one are farther than the cut).
      std::size_t dropped = 0;
      for (std::size_t k = taken; k < front; ++k) {
        const float y = y_of(index(members[k]));
        if (y >= ky.lo && y <= ky.hi)
          members[dropped++] = static_cast<std::uint64_t>(s.id(index(members[k])));
      }
      const y_range win = logit_window(ky, mx, inv);
      const bool max_kept = ky.hi >= 0.0f;
      s.keep_window(win.lo, win.hi);
      if (dropped == 0) {
        if (max_kept) s.lend_exps(e, kept);  // (kept on a dense row only: a narrowed one is compacted)
        return true;
      }
      std::sort(members, members + dropped);
      s.keep_if([&](float, std::int32_t id) {
        return !std::binary_search(members, members + dropped, static_cast<std::uint64_t>(id));
      });
      return true;
    }
    return false;
  });
}

// The exact histogram over every candidate's distance (few candidates, min_keep, or no ring found).
inline void typical_exact(row_state& s, float typical_p, std::size_t min_keep) {
  const float mx = s.max_logit();
  if (s.dense()) s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());
  if (min_keep > 1 && min_keep >= s.size()) return;  // (s.size() now counts candidates only)
  const float inv = s.inv_temperature();
  const row_moments mo = moments(s);  // leaves exp(y) in ws.probs
  const wsum bound = mass_bound(typical_p, mo.total);
  const std::size_t n = s.size();
  const float* v = s.logits();
  workspace& ws = s.ws();

  // The ranking key, computed the same way wherever it is needed.
  auto dist = [&](std::size_t i) { return typical_distance(scaled(v[i], mx, inv), mo.mean_y); };
  constexpr std::uint32_t last = hist_bins - 1;
  auto bin = [&](std::size_t i) {
    const double b = dist(i) * typical_bins_per_unit;
    return b < static_cast<double>(last) ? static_cast<std::uint32_t>(b) : last;
  };
  // Mass per distance bin; the cut falls in the first bin where the running mass reaches the bound.
  // Each candidate's bin replaces its exp value in ws.probs once its weight is counted.
  wsum* mass = ws.hist_mass.data();
  std::fill(mass, mass + hist_bins, wsum{0});
  // The bins add in 64 bits over runs of 2^15 candidates (2^15 weights of <= 2^48 fit), then
  // join the 128-bit masses: a 64-bit add per candidate instead of a 128-bit one.
  std::uint64_t part[hist_bins];
  float* slot = ws.probs.data();
  constexpr std::size_t run = std::size_t{1} << 15;
  for (std::size_t r0 = 0; r0 < n; r0 += run) {
    std::fill(part, part + hist_bins, std::uint64_t{0});
    const std::size_t end = n - r0 < run ? n : r0 + run;
    for (std::size_t i = r0; i < end; ++i) {
      const std::uint32_t b = bin(i);
      part[b] += weight(slot[i]);
      slot[i] = std::bit_cast<float>(b);  // only ever read back as bits
    }
    for (std::uint32_t b = 0; b < hist_bins; ++b) mass[b] += part[b];
  }
  auto bin_of = [&](std::size_t i) { return std::bit_cast<std::uint32_t>(slot[i]); };
  // (the search stops at the last bin, which takes every distance beyond)
  auto [edge, before] = find_edge_bin(mass, last, bound);
  // min_keep: the first min_keep in the same order end in bin `reach`, needing `reach_take` of it.
  std::size_t reach_take = 0;
  if (min_keep > 1) {
    wsum* count = mass;  // the masses are spent: count the candidates per bin instead
    std::fill(count, count + hist_bins, wsum{0});
    for (std::size_t i = 0; i < n; ++i) ++count[bin_of(i)];
    std::size_t below = 0;
    std::uint32_t reach = 0;
    while (below + static_cast<std::size_t>(count[reach]) < min_keep)
      below += static_cast<std::size_t>(count[reach++]);
    if (reach > edge) {
      edge = reach;
      before = bound;  // the mass cut takes nothing of the new edge bin
    }
    if (reach == edge) reach_take = min_keep - below;
  }
  // Only the edge bin is sorted: distance, then the higher logit, then the lower id.
  std::uint64_t* order = ws.keys.ensure(n);
  std::size_t members = 0;
  for (std::size_t i = 0; i < n; ++i) {  // branch-free: members <= i < n
    order[members] = i;
    members += static_cast<std::size_t>(bin_of(i) == edge);
  }
  std::sort(order, order + members, [&](std::uint64_t a, std::uint64_t b) {
    const double da = dist(a), db = dist(b);
    if (da != db) return da < db;
    if (v[a] != v[b]) return v[a] > v[b];
    return s.id(a) < s.id(b);
  });
  std::size_t take = 0;
  while (take < members && before < bound) before += weight(exp_scalar(scaled(v[order[take++]], mx, inv)));
  take = std::max(take, reach_take);
  std::sort(order, order + take);  // the kept edge members, in position order
  // Kept: every bin below the edge, and the first `take` of the edge bin. In place, in the
  // candidates' order (ascending id, or rank order after top_k): the write index never passes i.
  float* vals = ws.vals.data();
  std::int32_t* ids = ws.ids.data();
  // Branch-free on the kept / dropped pattern: every candidate is written, the cursor advances for
  // the kept ones (the edge bin, rare, may branch).
  std::size_t out = 0, next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = bin_of(i);
    const bool edge_kept = b == edge && next < take && order[next] == i;
    const float x = v[i];
    const std::int32_t id = s.id(i);
    vals[out] = x;
    ids[out] = id;
    out += static_cast<std::size_t>(b < edge || edge_kept);
    next += static_cast<std::size_t>(edge_kept);
  }
  s.assign(out, s.sorted());
}

}  // namespace detail

struct typical_stage : stage<typical_stage> {
  static constexpr stage_info info{};

  float typical_p;  // p, the probability mass kept; >= 1: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const {
    if (typical_p >= 1.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    // Many candidates: the ring around an estimate (no pass over every candidate but SIMD ones).
    // (members carry their sub-bin above a 32-bit index)
    if (min_keep == 1 && s.size() >= detail::typical_band_min && s.size() <= 0xFFFFFFFFu &&
        detail::typical_banded(s, typical_p, mx, detail::hist_bins))
      return;
    detail::typical_exact(s, typical_p, min_keep);
  }
};

inline typical_stage typical(float p, int min_keep = 1) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::typical: p must be in (0, 1]");
  return typical_stage{{}, p, detail::checked_min_keep(min_keep, "typical")};
}

}  // namespace nucleus
