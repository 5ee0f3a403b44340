// top_p(p, min_keep = 1): nucleus sampling. In rank order (logit desc, id asc), a token is kept while
// the probability of the tokens before it is < p; the token that crosses p is kept; and at least the
// first min_keep are (llama.cpp's and Hugging Face's min_keep).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

namespace detail {

inline constexpr std::size_t top_p_sort_limit = 4096;  // below this many survivors, sort them outright
inline constexpr float top_p_bins_per_unit = 32.0f;    // histogram resolution in scaled-logit units

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
    const detail::wsum total =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), mx, inv, nullptr); });
    const detail::wsum bound = detail::mass_bound(top_p, total);  // keep while the mass before < p * total

    if constexpr (P.may_be_sorted) {
      if (s.sorted()) {  // after top_k: walk the prefix, no sort, no histogram
        detail::wsum before = 0;
        std::size_t keep = 0;
        while (keep < s.size() && before < bound)
          before += detail::weight(detail::exp_scalar(s.scaled(keep++)));
        s.truncate(std::max(keep, min_keep));
        return;
      }
    }

    // Tokens whose weight is below (1 - p) * z / (2 n) cannot be reached: all of them together hold
    // less than the (1 - p) share the cut leaves out. One compaction drops them.
    const double z = detail::to_double(total);
    const double floor_w = (1.0 - static_cast<double>(top_p)) * z / (2.0 * static_cast<double>(s.size()));
    float reachable = static_cast<float>(std::log(floor_w));
    if (min_keep > 1) reachable = std::min(reachable, detail::scaled(detail::key_value(floor_key), mx, inv));
    s.keep_scaled_at_least(mx, inv, reachable);

    const std::size_t n = s.size();
    const float* v = s.logits();
    std::uint64_t* keys = ws.keys.ensure(n);
    std::size_t cut, listed;  // the cut's index in keys[0, listed), which hold every tie of its value
    if (n <= detail::top_p_sort_limit) {
      for (std::size_t i = 0; i < n; ++i) keys[i] = detail::rank_key(v[i], s.id(i));
      std::sort(keys, keys + n, std::greater<>{});
      cut = detail::walk_cut(keys, n, 0, bound, mx, inv);
      listed = n;
    } else {
      // Histogram of mass over scaled-logit bins (bin 0 holds the most likely tokens), then only the
      // bin where the cumulative mass crosses p is sorted.
      detail::wsum* mass = ws.hist_mass.data();
      std::fill(mass, mass + detail::hist_bins, detail::wsum{0});
      const float neg_unit = -detail::top_p_bins_per_unit;
      detail::mass_histogram(v, n, mx, inv, neg_unit, mass);
      const auto [edge, before] = detail::find_edge_bin(mass, detail::hist_bins, bound);
      if (edge == detail::hist_bins) return;  // unreachable (the bins hold the total): a guard
      // The edge bin's members, found with SIMD compares on the same float bin value as above:
      // bin == edge <=> edge <= b < edge + 1 (the last bin takes everything beyond).
      const float hi = edge + 1 < detail::hist_bins ? static_cast<float>(edge + 1) : detail::inf();
      const std::size_t members =
          detail::collect_bin(v, s.ids_or_null(), n, mx, inv, neg_unit, static_cast<float>(edge), hi, keys);
      std::sort(keys, keys + members, std::greater<>{});
      cut = detail::walk_cut(keys, members, before, bound, mx, inv);
      listed = members;  // equal values share a bin, so the edge bin holds all of the cut's ties
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
