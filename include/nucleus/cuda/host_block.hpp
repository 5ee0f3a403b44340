// The sequential backend of the GPU sampler's block primitives (nucleus/cuda/row_sampler.hpp): one
// host thread does a whole block's work, in index order. It exists so that the algorithm the kernels
// run can be checked bit for bit against nc::sampler on a machine without a GPU (tests/cuda/), and
// it gives the GPU's results on the host for any caller that wants them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "nucleus/cuda/row_sampler.hpp"

namespace nucleus::cuda {

class host_block {
 public:
  template <class F>
  std::uint64_t reduce_max(std::uint32_t n, F&& f) {
    std::uint64_t r = 0;
    for (std::uint32_t i = 0; i < n; ++i) r = std::max<std::uint64_t>(r, f(i));
    return r;
  }
  template <class F>
  std::uint64_t reduce_min(std::uint32_t n, F&& f) {
    std::uint64_t r = ~std::uint64_t{0};
    for (std::uint32_t i = 0; i < n; ++i) r = std::min<std::uint64_t>(r, f(i));
    return r;
  }
  template <class F>
  detail::wsum reduce_sum(std::uint32_t n, F&& f) {
    detail::wsum r = 0;
    for (std::uint32_t i = 0; i < n; ++i) r += f(i);
    return r;
  }
  template <class F>
  detail::found scan_find(std::uint32_t n, F&& f, detail::wsum point) {
    detail::wsum before = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      const detail::wsum w = f(i);
      if (before + w > point) return {static_cast<std::int64_t>(i), before};
      before += w;
    }
    return {-1, before};
  }
  template <class F>
  void histogram(std::uint32_t n, unsigned bins, F&& f) {
    std::fill(hist_, hist_ + bins, detail::wsum{0});
    for (std::uint32_t i = 0; i < n; ++i) {
      std::uint32_t bin = 0;
      std::uint64_t w = 0;
      if (f(i, bin, w)) hist_[bin] += w;
    }
  }
  detail::wsum bin(std::uint32_t j) const { return hist_[j]; }
  template <class F>
  std::uint32_t gather(std::uint32_t n, F&& f) {
    std::uint32_t c = 0;
    for (std::uint32_t i = 0; i < n; ++i)
      if (const std::uint64_t k = f(i); k != 0 && c < detail::max_gather) keys_[c++] = k;
    std::sort(keys_, keys_ + c, [](std::uint64_t a, std::uint64_t b) { return a > b; });
    return c;
  }
  std::uint64_t gathered(std::uint32_t j) const { return keys_[j]; }
  template <class F>
  void for_each(std::uint32_t n, F&& f) {
    for (std::uint32_t i = 0; i < n; ++i) f(i);
  }
  static std::uint32_t fetch_or(std::uint32_t* p, std::uint32_t v) { return std::exchange(*p, *p | v); }
  static std::uint32_t fetch_add(std::uint32_t* p, std::uint32_t v) { return std::exchange(*p, *p + v); }
  static std::uint32_t exchange(std::uint32_t* p, std::uint32_t v) { return std::exchange(*p, v); }
  static bool leader() { return true; }
  template <class F>
  void lane_fold(std::uint32_t n, double (&out)[detail::fold_lanes], F&& f) {
    for (double& x : out) x = 0.0;
    for (std::uint32_t i = 0; i < n; ++i) out[i % detail::fold_lanes] = f(i, out[i % detail::fold_lanes]);
  }

 private:
  detail::wsum hist_[detail::max_bins];
  std::uint64_t keys_[detail::max_gather];
};

}  // namespace nucleus::cuda
