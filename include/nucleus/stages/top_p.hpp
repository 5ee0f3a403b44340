// top_p(p): nucleus sampling. In rank order (logit desc, id asc), a token is kept while the
// probability of the tokens before it is < p; the token that crosses p is kept.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/kernels/filter.hpp"
#include "nucleus/kernels/reduce.hpp"

namespace nucleus {

namespace detail {

inline constexpr std::size_t top_p_sort_limit = 4096;  // below this many survivors, sort them outright
inline constexpr float top_p_bins_per_unit = 32.0f;    // histogram resolution in scaled-logit units

// Walks rank keys in order from mass `before`; returns the index of the last kept token.
inline std::size_t walk_cut(const std::uint64_t* keys, std::size_t n, double before, double target,
                            float shift, float scale) noexcept {
  std::size_t cut = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(before < target)) break;
    cut = i;
    before += exp(scaled(key_value(keys[i]), shift, scale));
  }
  return cut;
}

}  // namespace detail

struct top_p_stage : stage<top_p_stage> {
  static constexpr stage_info info{.truncates = true, .needs_probs = true, .needs_max = true};

  float p;

  void apply(row_state& s) const {
    if (p >= 1.0f) return;
    const float m = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    const float inv = s.inv_temperature();
    workspace& ws = s.ws();
    const double z = s.visit(
        [&](const auto* x) { return detail::exp_sum(x, s.size(), m, inv, nullptr, detail::block_elems); });
    const double target = static_cast<double>(p) * z;

    if (s.sorted()) {  // after top_k: walk the prefix, no sort, no histogram
      double before = 0.0;
      std::size_t keep = 0;
      while (keep < s.size() && before < target) before += detail::exp(s.scaled(keep++));
      s.truncate(keep);
      return;
    }

    // Tokens whose weight is below (1 - p) * z / (2 n) cannot be reached: all of them together hold
    // less than the (1 - p) share the cut leaves out. One compaction drops them.
    const double floor_w = (1.0 - static_cast<double>(p)) * z / (2.0 * static_cast<double>(s.size()));
    s.keep_scaled_at_least(m, inv, static_cast<float>(std::log(floor_w)));

    const std::size_t n = s.size();
    const float* v = s.logits();
    std::uint64_t* keys = ws.keys.ensure(n);
    std::size_t cut, listed;  // the cut's index in keys[0, listed), which hold every tie of its value
    if (n <= detail::top_p_sort_limit) {
      for (std::size_t i = 0; i < n; ++i) keys[i] = detail::rank_key(v[i], s.id(i));
      std::sort(keys, keys + n, std::greater<>{});
      cut = detail::walk_cut(keys, n, 0.0, target, m, inv);
      listed = n;
    } else {
      // Histogram of mass over scaled-logit bins (bin 0 holds the most likely tokens), then only the
      // bin where the cumulative mass crosses p is sorted.
      float* e = ws.probs.data();
      detail::exp_store(v, n, m, inv, e);
      double* mass = ws.hist_mass.data();
      double* mass2 = mass + detail::hist_bins;
      std::fill(mass, mass + 2 * detail::hist_bins, 0.0);
      constexpr float last_bin = static_cast<float>(detail::hist_bins - 1);
      const float neg_unit = -detail::top_p_bins_per_unit;
      auto bin_of = [&](float x) {
        const float b = detail::scaled(x, m, inv) * neg_unit;
        return b < last_bin ? static_cast<std::uint32_t>(b)
                            : static_cast<std::uint32_t>(detail::hist_bins - 1);
      };
      // Neighbouring tokens often share a bin: alternating two histograms halves the chain of
      // dependent adds into one bin. Each bin's mass is then added in one fixed order.
      std::size_t i = 0;
      for (; i + 1 < n; i += 2) {
        mass[bin_of(v[i])] += e[i];
        mass2[bin_of(v[i + 1])] += e[i + 1];
      }
      if (i < n) mass[bin_of(v[i])] += e[i];
      double before = 0.0;
      std::uint32_t edge = 0;
      for (; edge < detail::hist_bins; ++edge) {
        const double w = mass[edge] + mass2[edge];
        if (before + w >= target) break;
        before += w;
      }
      if (edge == detail::hist_bins) return;  // rounding left p unreached: everything is kept
      // The edge bin's members, found with SIMD compares on the same float bin value bin_of uses:
      // bin_of(x) == edge <=> edge <= b < edge + 1 (the last bin takes everything beyond).
      std::size_t members = 0;
      const detail::fpack sh = detail::splat(m), sc = detail::splat(inv), nu = detail::splat(neg_unit);
      const detail::fpack lo = detail::splat(static_cast<float>(edge));
      const detail::fpack hi =
          detail::splat(edge + 1 < detail::hist_bins ? static_cast<float>(edge + 1) : detail::inf());
      detail::for_each_pack(v, n, m, [&](const detail::fpack& x, std::size_t base) NUCLEUS_LAMBDA_INLINE {
        const detail::fpack b = detail::mul(detail::scaled(x, sh, sc), nu);
        for (std::uint64_t bits = detail::mask_bits(detail::ge(b, lo)) & detail::mask_bits(detail::gt(hi, b));
             bits; bits &= bits - 1) {
          const std::size_t k = base + static_cast<std::size_t>(std::countr_zero(bits));
          if (k >= n) break;
          keys[members++] = detail::rank_key(v[k], s.id(k));
        }
      });
      std::sort(keys, keys + members, std::greater<>{});
      cut = detail::walk_cut(keys, members, before, target, m, inv);
      listed = members;  // equal values share a bin, so the edge bin holds all of the cut's ties
    }
    const float cut_v = detail::key_value(keys[cut]);
    if (cut + 1 == listed || detail::key_value(keys[cut + 1]) != cut_v) {
      // No token tied with the cut is dropped: the cut is a plain logit threshold (one SIMD pass).
      s.keep_scaled_at_least(0.0f, 1.0f, cut_v);
      return;
    }
    const std::int32_t cut_id = detail::key_id(keys[cut]);
    s.keep_if</*KeepsMax=*/true>(
        [&](float x, std::int32_t id) { return (x > cut_v) | ((x == cut_v) & (id <= cut_id)); });
  }
};

inline top_p_stage top_p(float p) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::top_p: p must be in (0, 1]");
  return top_p_stage{{}, p};
}

}  // namespace nucleus
