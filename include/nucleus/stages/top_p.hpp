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

// Walks rank keys in order from mass `before`; returns the key of the last kept token.
inline std::uint64_t walk_cut(const std::uint64_t* keys, std::size_t n, double before, double target,
                              float shift, float scale) noexcept {
  std::uint64_t cut = keys[0];
  for (std::size_t i = 0; i < n; ++i) {
    if (!(before < target)) break;
    cut = keys[i];
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
    const double z =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), m, inv, nullptr, detail::block_elems); });
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
    std::uint64_t cut;
    if (n <= detail::top_p_sort_limit) {
      for (std::size_t i = 0; i < n; ++i) keys[i] = detail::rank_key(v[i], s.id(i));
      std::sort(keys, keys + n, std::greater<>{});
      cut = detail::walk_cut(keys, n, 0.0, target, m, inv);
    } else {
      // Histogram of mass over scaled-logit bins (bin 0 holds the most likely tokens), then only the
      // bin where the cumulative mass crosses p is sorted.
      float* e = ws.probs.data();
      detail::exp_store(v, n, m, inv, e);
      double* mass = ws.hist_mass.data();
      std::uint32_t* cnt = ws.hist_count.data();
      std::fill(mass, mass + detail::hist_bins, 0.0);
      std::fill(cnt, cnt + detail::hist_bins, 0u);
      auto bin_of = [&](float x) {
        const float b = -detail::scaled(x, m, inv) * detail::top_p_bins_per_unit;
        return b < static_cast<float>(detail::hist_bins - 1)
                   ? static_cast<std::uint32_t>(b)
                   : static_cast<std::uint32_t>(detail::hist_bins - 1);
      };
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t b = bin_of(v[i]);
        mass[b] += e[i];
        ++cnt[b];
      }
      double before = 0.0;
      std::uint32_t edge = 0;
      for (; edge < detail::hist_bins; ++edge) {
        if (before + mass[edge] >= target) break;
        before += mass[edge];
      }
      if (edge == detail::hist_bins) return;  // rounding left p unreached: everything is kept
      std::size_t members = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (bin_of(v[i]) == edge) keys[members++] = detail::rank_key(v[i], s.id(i));
      std::sort(keys, keys + members, std::greater<>{});
      cut = detail::walk_cut(keys, members, before, target, m, inv);
    }
    const float cut_v = detail::key_value(cut);
    const std::int32_t cut_id = detail::key_id(cut);
    s.keep_if</*KeepsMax=*/true>(
        [&](float x, std::int32_t id) { return x > cut_v || (x == cut_v && id <= cut_id); });
  }
};

inline top_p_stage top_p(float p) {
  if (!(p > 0.0f && p <= 1.0f)) throw std::invalid_argument("nucleus::top_p: p must be in (0, 1]");
  return top_p_stage{{}, p};
}

}  // namespace nucleus
