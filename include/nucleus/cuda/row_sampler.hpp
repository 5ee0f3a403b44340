// The GPU sampler's per-row algorithm, written once over a block of cooperating threads. It reaches
// the row only through a handful of block-wide primitives, which two backends provide: CUDA threads
// sharing memory (nucleus/cuda/block.cuh, used by the kernels) and one host thread in order
// (nucleus/cuda/host_block.hpp, used by the CPU test that requires nc::sampler's bits). So the very
// algorithm that runs on the device is tested on any machine.
//
// The primitives, each called by every thread of the block with the same arguments and returning
// the same value to all of them (f is called once per index, in any order, on any thread):
//   reduce_max(n, f), reduce_min(n, f)  max / min of the uint64 f(i) over i in [0, n) (0 / ~0 if n = 0)
//   reduce_sum(n, f)                    the exact wsum of f(i)
//   scan_find(n, f, point)              the first i whose inclusive running sum of f exceeds point,
//                                       in index order, with the sum before it ({-1, total} if none)
//   histogram(n, bins, f) and bin(j)    bin(j) = the wsum of w over the i with f(i, bin, w) true and
//                                       bin == j
//
// The algorithm (docs/cuda.md). Every stage the GPU implements cuts a prefix of the candidates in
// rank order (logit descending, id ascending: rank_key), so the candidate set is always "valid
// logits whose rank key is at least `cut`", one integer per row, and nothing is compacted or sorted.
// A stage that needs the token at a rank position (top-k's k-th, top-p's crossing, min_keep's floor,
// the draw in rank order) finds it by radix selection over the ordered value bits: three histogram
// passes of 11, 11 and 10 bits, weighted by count or by the exact integer weights, then the tie
// among equal values by id. The arithmetic is simd/scalar.hpp's, shared with the CPU.
//
// What is not an algorithm choice but the CPU sampler's bookkeeping, reproduced because results
// depend on it: the candidate count the CPU sees (the row's length, NaN and -inf included, until the
// first cut), whether the candidates are in rank order (after a top-k that cut, the draw walks rank
// order, else id order), the +inf rule (a row holding +inf keeps just those, at logit 0), and the
// sign of a zero maximum.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/host_device.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/cuda/row_params.hpp"
#include "nucleus/simd/scalar.hpp"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace nucleus::cuda {

// One row's result, as nc::sampler's row_result with logprobs = -1.
struct row_output {
  std::int32_t token = -1;  // -1 unless status == ok
  float logprob = 0.0f;     // the draw's own, in the processed distribution (0 when greedy)
  nucleus::status status = nucleus::status::ok;
};

namespace detail {

using nucleus::detail::wsum;

// scan_find's answer.
struct found {
  std::int64_t index;  // -1: the point is at or past the total
  wsum before;         // the running sum before index
};

inline constexpr unsigned max_bins = 2048;
inline constexpr int digit_passes = 3;
NUCLEUS_HD constexpr int digit_shift(int pass) noexcept {
  return pass == 0 ? 21 : pass == 1 ? 10 : 0;
}
NUCLEUS_HD constexpr int digit_width(int pass) noexcept {
  return pass == 2 ? 10 : 11;
}

NUCLEUS_HD inline double log_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::log(z);  // CUDA's log: within 1 ulp of glibc's (docs/cuda.md)
#else
  return std::log(z);
#endif
}

// A row of V logits in device (or host) memory.
template <class T>
struct row_ref {
  const T* x;
  std::uint32_t n;
};

template <class Block, class T>
class row_sampler {
 public:
  NUCLEUS_HD row_sampler(Block& b, row_ref<T> row) : b_(b), x_(row.x), v_(row.n), n_(row.n) {}

  NUCLEUS_HD row_output run(const row_params& p, draw_key key) {
    if (v_ == 0) return {-1, 0.0f, nucleus::status::empty_row};
    for (int k = 0; k < max_gpu_stages; ++k) {
      if (!live() || greedy_) continue;  // as the chain: nothing to cut, or T = 0 already
      switch (p.stages[k]) {
        case gpu_stage::temperature:
          temperature(p);
          break;
        case gpu_stage::top_k:
          top_k(p);
          break;
        case gpu_stage::top_p:
          top_p(p);
          break;
        case gpu_stage::min_p:
          min_p(p);
          break;
        case gpu_stage::none:
          break;
      }
    }
    return greedy_ ? greedy_pick() : draw(key);
  }

 private:
  // --- the candidate set ----------------------------------------------------------------------
  NUCLEUS_HD bool live() const noexcept { return status_ == nucleus::status::ok && n_ > 0; }

  // Whether token i is a candidate, and its logit as the CPU's candidate list holds it.
  NUCLEUS_HD bool value_of(std::uint32_t i, float& v) const noexcept {
    using nucleus::detail::inf;
    const float raw = to_float(x_[i]);
    if (!(raw > -inf())) return false;  // NaN and -inf are never candidates
    if (inf_mode_) {
      if (!(raw == inf())) return false;
      v = 0.0f;
    } else {
      v = normalized_ && raw == 0.0f ? 0.0f : raw;  // top-k's list holds rank keys' values: +0
    }
    return nucleus::detail::rank_key(v, static_cast<std::int32_t>(i)) >= cut_;
  }
  NUCLEUS_HD std::uint64_t weight_of(float v) const noexcept {
    using namespace nucleus::detail;
    return weight(exp_scalar(scaled(v, max_, inv_)));
  }
  NUCLEUS_HD std::uint32_t count_alive() {
    return static_cast<std::uint32_t>(b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? 1 : 0;
    }));
  }
  NUCLEUS_HD wsum total_weight() {
    return b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? weight_of(v) : 0;
    });
  }
  // After a cut: the CPU's list is compacted (its count is the candidates'), its maximum kept.
  NUCLEUS_HD void cut_to(std::uint64_t cut) {
    cut_ = cut;
    dense_ = false;
    n_ = count_alive();
    max_stale_ = true;
  }

  // The maximum, as row_state::max_logit(): no candidate -> no_candidates; a +inf maximum keeps the
  // +inf tokens only, at logit 0. Stages only cut below the maximum, so its value never changes;
  // the sign of a zero maximum follows the candidates the CPU scans (docs/cuda.md).
  NUCLEUS_HD void ensure_max() {
    using namespace nucleus::detail;
    if (has_max_ && !(max_ == 0.0f && max_stale_)) return;
    const std::uint64_t top = b_.reduce_max(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      if (!value_of(i, v)) return 0;
      return (std::uint64_t{ordered(v)} << 1) | (bits_of(v) == 0 ? 1u : 0u);  // +0 over -0
    });
    max_stale_ = false;
    if (top == 0) {
      status_ = nucleus::status::no_candidates;
      n_ = 0;
      return;
    }
    float m = from_ordered(static_cast<std::uint32_t>(top >> 1));
    if (m == 0.0f) m = top & 1 ? 0.0f : -0.0f;
    if (!has_max_ && m == inf()) {
      // The cut so far, if any, is among the +inf tokens (a rank key of logit 0 now) or below them.
      cut_ = cut_ != 0 && key_value(cut_) == inf() ? rank_key(0.0f, key_id(cut_)) : 0;
      inf_mode_ = true;
      dense_ = false;
      n_ = count_alive();
      m = 0.0f;
    }
    max_ = m;
    has_max_ = true;
  }

  // --- rank selection -------------------------------------------------------------------------
  // The rank key of the candidate at rank position `point` in rank order, positions weighted by
  // count or by weight: the first candidate whose inclusive running weight exceeds point (< total).
  NUCLEUS_HD std::uint64_t rank_select(wsum point, bool weighted) {
    using namespace nucleus::detail;
    std::uint32_t prefix = 0;  // the ordered-value bits decided so far
    wsum before = 0;           // the weight of the candidates ranked above the prefix's values
    for (int pass = 0; pass < digit_passes; ++pass) {
      const int shift = digit_shift(pass), width = digit_width(pass);
      const unsigned bins = 1u << width;
      b_.histogram(v_, bins, [&](std::uint32_t i, std::uint32_t& bin, std::uint64_t& w) {
        float v;
        if (!value_of(i, v)) return false;
        const std::uint32_t o = ordered(v);
        if (pass > 0 && (o >> (shift + width)) != prefix) return false;
        bin = (o >> shift) & (bins - 1);
        w = weighted ? weight_of(v) : 1;
        return true;
      });
      // The bins from the highest value down.
      const found f = b_.scan_find(
          bins, [&](std::uint32_t j) -> wsum { return b_.bin(bins - 1 - j); }, point - before);
      if (f.index < 0) return 0;  // unreachable: point < the candidates' total
      prefix = (prefix << width) | (bins - 1 - static_cast<std::uint32_t>(f.index));
      before += f.before;
    }
    // Equal values weigh the same: the tie in rank (= id) order is found by counting.
    const float v = from_ordered(prefix);
    const std::uint64_t w = weighted ? weight_of(v) : 1;
    const wsum j = (point - before) / w;
    const found t = b_.scan_find(
        v_,
        [&](std::uint32_t i) -> wsum {
          float x;
          return value_of(i, x) && ordered(x) == prefix ? 1 : 0;
        },
        j);
    if (t.index < 0) return 0;
    return rank_key(v, static_cast<std::int32_t>(t.index));
  }

  // min_keep_floor (stages/min_keep.hpp): the rank key of the min_keep-th candidate, or 0 when the
  // floor keeps everything.
  NUCLEUS_HD std::uint64_t min_keep_floor(std::uint32_t min_keep) {
    if (min_keep >= n_) return 0;
    const std::uint32_t count = dense_ ? count_alive() : n_;
    if (count < min_keep) return 0;
    return rank_select(min_keep - 1, false);
  }

  // --- the stages -----------------------------------------------------------------------------
  NUCLEUS_HD void temperature(const row_params& p) {
    if (p.greedy) {
      greedy_ = true;
    } else {
      inv_ = p.inv_temperature;
    }
  }

  NUCLEUS_HD void top_k(const row_params& p) {
    if (p.top_k <= 0) return;
    const auto k = static_cast<std::uint32_t>(p.top_k);
    if (k >= n_) return;  // keeps all (the CPU's count: V while dense)
    const std::uint32_t count = dense_ ? count_alive() : n_;
    std::uint64_t cut = cut_;
    if (count >= k) {
      const std::uint64_t kth = rank_select(k - 1, false);
      cut =
          p.keep_ties ? std::uint64_t{nucleus::detail::ordered(nucleus::detail::key_value(kth))} << 32 : kth;
      if (cut < cut_) cut = cut_;
    }
    sorted_ = true;
    normalized_ = true;
    cut_to(cut);
  }

  NUCLEUS_HD void top_p(const row_params& p) {
    using namespace nucleus::detail;
    if (p.top_p >= 1.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    std::uint64_t floor = ~std::uint64_t{0};
    if (p.min_keep > 1) {
      floor = min_keep_floor(p.min_keep);
      if (floor == 0) return;
    }
    const wsum bound = mass_bound(p.top_p, total_weight());  // >= 1: the maximum weighs 2^48
    const std::uint64_t crossing = rank_select(bound - 1, true);
    cut_to(crossing < floor ? crossing : floor);
  }

  NUCLEUS_HD void min_p(const row_params& p) {
    using namespace nucleus::detail;
    if (p.min_p <= 0.0f) return;
    ensure_max();
    if (!live()) return;
    const float threshold = p.log_min_p;
    if (p.min_keep > 1) {
      const std::uint64_t floor = min_keep_floor(p.min_keep);
      if (floor == 0) return;
      if (!(scaled(key_value(floor), max_, inv_) >= threshold)) {
        cut_to(floor);
        return;
      }
    }
    // p >= min_p * p_max is a logit threshold, so the kept set is a rank prefix: its last key.
    const std::uint64_t last = b_.reduce_min(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      if (!value_of(i, v) || !(scaled(v, max_, inv_) >= threshold)) return ~std::uint64_t{0};
      return rank_key(v, static_cast<std::int32_t>(i));
    });
    cut_to(last);
  }

  // --- the terminals --------------------------------------------------------------------------
  NUCLEUS_HD row_output fail() const noexcept {
    return {-1, 0.0f, status_ == nucleus::status::ok ? nucleus::status::no_candidates : status_};
  }

  // The highest candidate, ties to the lowest id: the largest rank key.
  NUCLEUS_HD row_output greedy_pick() {
    if (!live()) return fail();
    const std::uint64_t top = b_.reduce_max(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? nucleus::detail::rank_key(v, static_cast<std::int32_t>(i)) : 0;
    });
    if (top == 0) {
      status_ = nucleus::status::no_candidates;
      return fail();
    }
    return {nucleus::detail::key_id(top), 0.0f, nucleus::status::ok};
  }

  // The categorical draw (stages/categorical.hpp): the point floor(u * total) in the exact weights,
  // located in the candidates' order: rank order after a top-k that cut, else id order.
  NUCLEUS_HD row_output draw(draw_key key) {
    using namespace nucleus::detail;
    ensure_max();
    if (!live()) return fail();
    const wsum total = total_weight();
    const wsum point = draw_point(key, total);
    std::int64_t at = -1;
    if (sorted_) {
      const std::uint64_t k = rank_select(point, true);
      if (k != 0) at = key_id(k);
    } else {
      at = b_.scan_find(
                 v_,
                 [&](std::uint32_t i) -> wsum {
                   float v;
                   return value_of(i, v) ? weight_of(v) : 0;
                 },
                 point)
               .index;
    }
    float v = 0.0f;
    if (at < 0 || !value_of(static_cast<std::uint32_t>(at), v)) {  // unreachable: total >= 2^48
      status_ = nucleus::status::no_candidates;
      return fail();
    }
    const double y = static_cast<double>(scaled(v, max_, inv_));
    return {static_cast<std::int32_t>(at), static_cast<float>(y - log_of(to_double(total))),
            nucleus::status::ok};
  }

  Block& b_;
  const T* x_;
  std::uint32_t v_;          // the row's length
  std::uint32_t n_;          // the CPU's candidate count
  std::uint64_t cut_ = 0;    // candidates: valid logits with rank key >= cut_
  float inv_ = 1.0f;         // 1/T
  float max_ = 0.0f;         // the candidates' maximum (valid once has_max_)
  bool dense_ = true;        // no cut yet: the CPU counts the whole row
  bool sorted_ = false;      // the CPU's list is in rank order (a top-k cut)
  bool normalized_ = false;  // the CPU's list holds rank keys' values (-0 reads +0)
  bool inf_mode_ = false;    // the row held +inf: those tokens only, at logit 0
  bool has_max_ = false;
  bool max_stale_ = false;  // a cut since the maximum was taken (only its zero sign can move)
  bool greedy_ = false;
  nucleus::status status_ = nucleus::status::ok;
};

}  // namespace detail

// Samples one row with any block backend: the function the kernels and the CPU test share.
template <class Block, class T>
NUCLEUS_HD row_output sample_row(Block& b, const T* row, std::uint32_t vocab, const row_params& p,
                                 draw_key key) {
  detail::row_sampler<Block, T> s(b, detail::row_ref<T>{row, vocab});
  return s.run(p, key);
}

}  // namespace nucleus::cuda
