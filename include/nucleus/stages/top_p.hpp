// top_p(p, min_keep = 1): nucleus sampling. In rank order (logit desc, id asc), a token is kept while
// the probability of the tokens before it is < p; the token that crosses p is kept; and at least the
// first min_keep are (llama.cpp's and Hugging Face's min_keep).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

namespace detail {

inline constexpr std::size_t top_p_sort_limit = 4096;  // below this many survivors, sort them outright
inline constexpr float top_p_bins_per_unit = 32.0f;    // histogram resolution in scaled-logit units
inline constexpr std::size_t top_p_sub_sort = 256;     // an edge bin this large is cut again ...
inline constexpr std::size_t top_p_sub_bins = 64;      // ... into this many sub-bins, before a sort

// Walks rank keys in order from mass `before`; returns the index of the last kept token (the one
// whose weight takes the running mass to `bound` or past it).
inline std::size_t walk_cut(const std::uint64_t* keys, std::size_t n, wsum before, wsum bound, float shift,
                            float scale) noexcept {
  std::size_t cut = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(before < bound)) break;
    cut = i;
    before += weight(exp_scalar(scaled(key_value(keys[i]), shift, scale)));
  }
  return cut;
}

// Cuts a run of members further: sub-bins on the float bin value b, sub = trunc((b - lo) * per)
// clamped to [0, subs) (monotone in the logit, so equal logits share one), each sub-bin's mass from
// weight_of(key); moves the members of the first sub-bin where the running mass from `before`
// reaches `bound` to the front of keys. Returns their count and the mass before them; count 0 when
// no sub-bin reaches it.
struct edge_part {
  std::size_t members;
  wsum before;
};
template <class WeightOf>
edge_part cut_sub_bins(std::uint64_t* keys, std::size_t members, wsum before, wsum bound, float shift,
                       float scale, float unit, float lo, float per, std::size_t subs, wsum* mass,
                       WeightOf&& weight_of) noexcept {
  auto sub = [&](float v) {
    const float d = (scaled(v, shift, scale) * unit - lo) * per;
    return d > 0.0f ? (d < static_cast<float>(subs - 1) ? static_cast<std::size_t>(d) : subs - 1) : 0;
  };
  std::fill(mass, mass + subs, wsum{0});
  for (std::size_t m = 0; m < members; ++m) mass[sub(key_value(keys[m]))] += weight_of(keys[m]);
  std::size_t at = 0;
  while (at < subs && before + mass[at] < bound) before += mass[at++];
  if (at == subs) return {0, before};
  std::size_t front = 0;
  for (std::size_t m = 0; m < members; ++m)
    if (sub(key_value(keys[m])) == at) std::swap(keys[front++], keys[m]);
  return {front, before};
}

// A large edge bin is cut again into top_p_sub_bins sub-bins before the sort (a small one is left
// whole). The edge bin holds the cut, so a sub-bin does.
inline edge_part refine_edge(std::uint64_t* keys, std::size_t members, wsum before, wsum bound, float shift,
                             float scale, float unit, float edge) noexcept {
  if (members <= top_p_sub_sort) return {members, before};
  wsum mass[top_p_sub_bins];
  const edge_part part =
      cut_sub_bins(keys, members, before, bound, shift, scale, unit, edge, static_cast<float>(top_p_sub_bins),
                   top_p_sub_bins, mass,
                   [&](std::uint64_t k) { return weight(exp_scalar(scaled(key_value(k), shift, scale))); });
  return part.members > 0 ? part : edge_part{members, before};  // (a guard: the edge bin reaches the bound)
}

// About how many of x[0, n) are above x0: every 16th run of 64 logits (sampled_cut's sample) counted,
// times 16. It only picks top-p's route, peaked or flat, and both routes find the same cut; a full
// count was one more pass over the row.
template <class X>
std::size_t sampled_count_greater(const X* x, std::size_t n, float x0) noexcept {
  std::size_t c = 0;
  for (std::size_t i0 = 0; i0 < n; i0 += 16 * 64)
    c += count_greater(x + i0, std::min<std::size_t>(64, n - i0), x0);
  return 16 * c;
}

// Flat top-p over a dense row whose exp values e[i] are stored (exp_sum_store): finds the cut without
// a histogram of every logit. Every 16th run of 64 logits goes into a histogram on the float bin
// value b (top_p_bins_per_unit per scaled-logit unit, as mass_histogram's); from the least likely
// bin upward, the bin where 16 times the sampled mass reaches total - bound estimates the cut's
// (from the bottom, as a few heavy tokens at the top, which a sample misses, do not move it). One
// memory pass (cached_band) then gives the exact mass before a band of two bins around the estimate,
// per block of the row, and the band's members; a cut outside the band moves the band (a few times
// at most). `front` keys at the front of `keys`, sorted, hold the cut (index `cut`) and all of its
// ties; keys[0, members) are the band's; front = 0: no band held the cut (the caller falls back to
// the full histogram).
struct band_cut {
  std::size_t front = 0, cut = 0, members = 0;
  wsum before = 0;  // the mass before the band (also in blocks, per block)
};
template <class X>
band_cut sampled_cut(const X* x, const float* e, std::size_t n, float shift, float scale, wsum total,
                     wsum bound, wsum* scratch_bins, std::uint64_t* keys, std::uint64_t* blocks) noexcept {
  constexpr std::uint32_t last = hist_bins - 1;
  const float unit = -top_p_bins_per_unit;
  std::fill(scratch_bins, scratch_bins + hist_bins, wsum{0});
  for (std::size_t i0 = 0; i0 < n; i0 += 16 * 64) {
    const std::size_t end = n - i0 < 64 ? n : i0 + 64;
    for (std::size_t i = i0; i < end; ++i) {
      const float b = scaled(to_float(x[i]), shift, scale) * unit;
      if (!(e[i] > 0.0f)) continue;  // (weight 0: -inf, NaN, or below exp's range)
      scratch_bins[b < static_cast<float>(last) ? static_cast<std::uint32_t>(b) : last] += weight(e[i]);
    }
  }
  const wsum below = total - bound;  // the mass the estimate looks for from the bottom
  wsum acc = 0;
  std::uint32_t est = last;
  while (est > 0 && (acc + scratch_bins[est]) * 16 < below) acc += scratch_bins[est--];
  float lo = std::max(0.0f, static_cast<float>(est) - 0.5f), hi = static_cast<float>(est) + 1.5f;
  constexpr std::size_t subs = 256;
  wsum* mass = scratch_bins;  // (the sample is spent; hist_bins >= subs)
  for (int attempt = 0; attempt < 4; ++attempt) {
    band_cut r;
    r.members = cached_band(x, e, n, shift, scale, unit, lo, hi, keys, n, &r.before, blocks);
    const float width = hi - lo;
    if (r.before >= bound) {  // the cut lies above the band
      hi = lo;
      lo = std::max(0.0f, lo - 4.0f * width);
      if (hi <= 0.0f) return {};
      continue;
    }
    // The band's sub-bins (their weights stored), then a sort of the one that holds the cut.
    const auto [front, before] = cut_sub_bins(keys, r.members, r.before, bound, shift, scale, unit, lo,
                                              static_cast<float>(subs) / width, subs, mass,
                                              [&](std::uint64_t k) { return weight(e[key_id(k)]); });
    if (front == 0) {  // the cut lies below the band
      lo = hi;
      hi = hi + 4.0f * width;
      continue;
    }
    r.front = front;
    std::sort(keys, keys + r.front, std::greater<>{});
    r.cut = walk_cut(keys, r.front, before, bound, shift, scale);
    return r;
  }
  return {};
}

}  // namespace detail

// Masses are exact integer weights (simd/scalar.hpp), so the cut depends only on the row and p.
struct top_p_stage : stage<top_p_stage> {
  static constexpr stage_info info{};

  float top_p;  // p, the probability mass kept; >= 1: disabled
  std::size_t min_keep = 1;

  void apply(row_state& s) const { apply(s, plan<row_plan{}>{}); }
  // Before any stage that sorts (the chain's plan says so), there is no sorted prefix to walk.
  template <row_plan P>
  void apply(row_state& s, plan<P>) const {
    if (top_p >= 1.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    // The rank key of the min_keep-th candidate: the cut never falls before it (0: keep everything).
    const std::uint64_t floor_key = min_keep > 1 ? detail::min_keep_floor(s, min_keep) : ~std::uint64_t{0};
    if (floor_key == 0) return;
    const float inv = s.inv_temperature();
    workspace& ws = s.ws();
    if constexpr (P.may_be_sorted) {
      if (s.sorted()) {  // after top_k: walk the prefix, no sort, no histogram
        const detail::wsum total =
            s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), mx, inv, nullptr); });
        const detail::wsum bound = detail::mass_bound(top_p, total);
        detail::wsum before = 0;
        std::size_t keep = 0;
        while (keep < s.size() && before < bound)
          before += detail::weight(detail::exp_scalar(s.scaled(keep++)));
        s.truncate(std::max(keep, min_keep));
        return;
      }
    }

    std::size_t n = s.size();
    std::uint64_t* keys = ws.keys.ensure(n);
    std::size_t cut, listed;  // the cut's index in keys[0, listed), which hold every tie of its value
    if (n <= detail::top_p_sort_limit) {
      const detail::wsum total =
          s.visit([&](const auto* x) { return detail::exp_sum(x, n, mx, inv, nullptr); });
      const detail::wsum bound = detail::mass_bound(top_p, total);
      if (s.dense())
        s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());  // float, no -inf
      n = s.size();
      const float* v = s.logits();
      for (std::size_t i = 0; i < n; ++i) keys[i] = detail::rank_key(v[i], s.id(i));
      std::sort(keys, keys + n, std::greater<>{});
      cut = detail::walk_cut(keys, n, 0, bound, mx, inv);
      listed = n;
    } else {
      // Tokens whose weight is below (1 - p) * z / (2 n) cannot be reached: all of them together hold
      // less than the (1 - p) share the cut leaves out. The total z is at least 1 (the maximum's
      // weight), so a first bound needs no exp: a peaked row has few tokens above it, a flat one many.
      double reach = std::log((1.0 - static_cast<double>(top_p)) / (2.0 * static_cast<double>(n)));
      if (min_keep > 1)
        reach = std::min(reach, static_cast<double>(detail::scaled(detail::key_value(floor_key), mx, inv)));
      const float reach_x = mx + static_cast<float>(reach - 0.0625) / inv;  // (a margin for the roundings)
      const std::size_t reachable =
          s.visit([&](const auto* x) { return detail::sampled_count_greater(x, n, reach_x); });
      const float neg_unit = -detail::top_p_bins_per_unit;
      detail::wsum* mass = ws.hist_mass.data();
      std::fill(mass, mass + detail::hist_bins, detail::wsum{0});
      detail::wsum total = 0, bound = 0;
      std::uint32_t lump = detail::hist_bins - 1;
      const bool flat = reachable * 4 > n;  // (n changes below: the peaked path copies)
      if (!flat) {
        // Peaked: the total, then the tokens reachable under it copied out (few), and their histogram.
        total = s.visit([&](const auto* x) { return detail::exp_sum(x, n, mx, inv, nullptr); });
        const double floor_w =
            (1.0 - static_cast<double>(top_p)) * detail::to_double(total) / (2.0 * static_cast<double>(n));
        float reach_y = static_cast<float>(std::log(floor_w));
        if (min_keep > 1) reach_y = std::min(reach_y, detail::scaled(detail::key_value(floor_key), mx, inv));
        s.keep_scaled_at_least(mx, inv, reach_y);
        n = s.size();
        detail::mass_histogram(s.logits(), n, mx, inv, neg_unit, lump, mass);
      } else if (s.dense() && min_keep == 1) {
        // Flat and dense: one exp pass stores the exp values and sums them; a sampled band finds the
        // cut (sampled_cut); the row keeps the cut as a pending window and lends the draw the stored
        // exp values (core/row_state.hpp), so the draw reads memory instead of computing exp again.
        float* e = ws.probs.data();
        total = s.visit([&](const auto* x) { return detail::exp_sum_store(x, n, mx, inv, e); });
        bound = detail::mass_bound(top_p, total);
        std::uint64_t* blocks = ws.blocks.data();
        const detail::band_cut r = s.visit([&](const auto* x) {
          return detail::sampled_cut(x, e, n, mx, inv, total, bound, mass, keys, blocks);
        });
        if (r.front > 0) {
          const float cut_v = detail::key_value(keys[r.cut]);
          if (r.cut + 1 == r.front || detail::key_value(keys[r.cut + 1]) != cut_v) {
            // Kept: everything before the band (its weights already in blocks) and the band's
            // members at or above the cut: the draw's block sums and total, ready.
            detail::wsum kept = r.before;
            for (std::size_t m = 0; m < r.members; ++m) {
              if (detail::key_value(keys[m]) < cut_v) continue;
              const auto id = static_cast<std::size_t>(detail::key_id(keys[m]));
              const std::uint64_t w = detail::weight(e[id]);
              blocks[id / detail::block_elems] += w;
              kept += w;
            }
            s.keep_window(cut_v, detail::inf());
            s.lend_exps(e, kept);
            return;
          }
          const std::int32_t cut_id = detail::key_id(keys[r.cut]);
          s.keep_if([&](float x, std::int32_t id) { return x > cut_v || (x == cut_v && id <= cut_id); });
          return;
        }
        // (no band held the cut: the full histogram below)
        std::fill(mass, mass + detail::hist_bins, detail::wsum{0});
        total = 0;
      }
      if (flat) {
        // Flat: one pass gives the total and the histogram; the bins past the first bound (with a
        // margin of two) share one, whose weights add in registers (mass_histogram's lump).
        const double lump_at = -reach * static_cast<double>(detail::top_p_bins_per_unit) + 2.0;
        lump = static_cast<std::uint32_t>(std::min(lump_at, static_cast<double>(lump)));
        s.visit([&](const auto* x) { return detail::mass_histogram(x, n, mx, inv, neg_unit, lump, mass); });
        for (std::uint32_t b = 0; b <= lump; ++b) total += mass[b];
      }
      bound = detail::mass_bound(top_p, total);
      // The cut falls in the first bin where the running mass reaches p of the total (bin 0 holds the
      // most likely tokens).
      const auto [edge, before] = detail::find_edge_bin(mass, lump + 1, bound);
      if (edge > lump) return;  // unreachable (the bins hold the total): a guard
      // The edge bin's members, found with SIMD compares on the same float bin value as above:
      // bin == edge <=> edge <= b < edge + 1 (the last or lumped bin takes everything beyond).
      const float hi = edge < lump ? static_cast<float>(edge + 1) : detail::inf();
      const std::int32_t* ids = s.ids_or_null();
      const auto lo = static_cast<float>(edge);  // (a lambda may not capture a structured binding)
      const std::size_t members = s.visit(
          [&](const auto* x) { return detail::collect_bin(x, ids, n, mx, inv, neg_unit, lo, hi, keys); });
      const auto [first, first_before] =
          detail::refine_edge(keys, members, before, bound, mx, inv, neg_unit, lo);
      std::sort(keys, keys + first, std::greater<>{});
      cut = detail::walk_cut(keys, first, first_before, bound, mx, inv);
      listed = first;  // equal values share a bin and a sub-bin: these hold all of the cut's ties
      const float cut_v = detail::key_value(keys[cut]);
      if (keys[cut] <= floor_key && s.dense() &&
          (cut + 1 == listed || detail::key_value(keys[cut + 1]) != cut_v)) {
        // A plain logit threshold on a flat dense row: it stays pending on the row instead of a copy
        // of most of it (core/row_state.hpp: the draw reads it in place).
        s.keep_window(cut_v, detail::inf());
        return;
      }
    }
    if (keys[cut] > floor_key) {  // min_keep reaches past the cut
      detail::keep_rank_floor(s, floor_key);
      return;
    }
    const float cut_v = detail::key_value(keys[cut]);
    if (cut + 1 == listed || detail::key_value(keys[cut + 1]) != cut_v) {
      // No token tied with the cut is dropped: the cut is a plain logit threshold (one SIMD pass).
      s.keep_scaled_at_least(0.0f, 1.0f, cut_v);
      return;
    }
    const std::int32_t cut_id = detail::key_id(keys[cut]);
    s.keep_if([&](float x, std::int32_t id) { return x > cut_v || (x == cut_v && id <= cut_id); });
  }
};

inline top_p_stage top_p(float p, int min_keep = 1) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::top_p: p must be in (0, 1]");
  return top_p_stage{{}, p, detail::checked_min_keep(min_keep, "top_p")};
}

}  // namespace nucleus
