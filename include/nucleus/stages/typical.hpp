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
}

struct typical_stage : stage<typical_stage> {
  static constexpr stage_info info{};

  float typical_p;  // p, the probability mass kept; >= 1: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const {
    if (typical_p >= 1.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    if (s.dense()) s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());
    if (min_keep > 1 && min_keep >= s.size()) return;  // (s.size() now counts candidates only)
    const float inv = s.inv_temperature();
    const detail::row_moments mo = detail::moments(s);  // leaves exp(y) in ws.probs
    const detail::wsum bound = detail::mass_bound(typical_p, mo.total);
    const std::size_t n = s.size();
    const float* v = s.logits();
    workspace& ws = s.ws();

    // The ranking key, computed the same way wherever it is needed.
    auto dist = [&](std::size_t i) {
      return std::fabs(static_cast<double>(detail::scaled(v[i], mx, inv)) - mo.mean_y);
    };
    constexpr std::uint32_t last = detail::hist_bins - 1;
    auto bin = [&](std::size_t i) {
      const double b = dist(i) * detail::typical_bins_per_unit;
      return b < static_cast<double>(last) ? static_cast<std::uint32_t>(b) : last;
    };
    // Mass per distance bin; the cut falls in the first bin where the running mass reaches the bound.
    // Each candidate's bin replaces its exp value in ws.probs once its weight is counted.
    detail::wsum* mass = ws.hist_mass.data();
    std::fill(mass, mass + detail::hist_bins, detail::wsum{0});
    // The bins add in 64 bits over runs of 2^15 candidates (2^15 weights of <= 2^48 fit), then
    // join the 128-bit masses: a 64-bit add per candidate instead of a 128-bit one.
    std::uint64_t part[detail::hist_bins];
    float* slot = ws.probs.data();
    constexpr std::size_t run = std::size_t{1} << 15;
    for (std::size_t r0 = 0; r0 < n; r0 += run) {
      std::fill(part, part + detail::hist_bins, std::uint64_t{0});
      const std::size_t end = n - r0 < run ? n : r0 + run;
      for (std::size_t i = r0; i < end; ++i) {
        const std::uint32_t b = bin(i);
        part[b] += detail::weight(slot[i]);
        slot[i] = std::bit_cast<float>(b);  // only ever read back as bits
      }
      for (std::uint32_t b = 0; b < detail::hist_bins; ++b) mass[b] += part[b];
    }
    auto bin_of = [&](std::size_t i) { return std::bit_cast<std::uint32_t>(slot[i]); };
    // (the search stops at the last bin, which takes every distance beyond)
    auto [edge, before] = detail::find_edge_bin(mass, last, bound);
    // min_keep: the first min_keep in the same order end in bin `reach`, needing `reach_take` of it.
    std::size_t reach_take = 0;
    if (min_keep > 1) {
      detail::wsum* count = mass;  // the masses are spent: count the candidates per bin instead
      std::fill(count, count + detail::hist_bins, detail::wsum{0});
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
    while (take < members && before < bound)
      before += detail::weight(detail::exp_scalar(detail::scaled(v[order[take++]], mx, inv)));
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
};

inline typical_stage typical(float p, int min_keep = 1) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::typical: p must be in (0, 1]");
  return typical_stage{{}, p, detail::checked_min_keep(min_keep, "typical")};
}

}  // namespace nucleus
