// Worked example: plugging your own kernels into nucleus_bench. Linked into nucleus_bench, so
// `nucleus_bench --benchmark_filter=top_k` shows BM_custom_top_k/partial_sort/<V> next to
// BM_ours_top_k/<V>, after the harness has checked the kernel against its scalar reference.
//
// To add yours: copy this file, swap the bodies, and list it in NUCLEUS_BENCH_KERNELS (see
// docs/benchmarking.md). Registration only queues the kernel, so it can run at static initialization.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "harness.hpp"

namespace {

// The textbook top-k: sort an index array's first k by (logit desc, id asc). It allocates and
// compares through memory on every call, which is what the harness is there to make visible.
void partial_sort_top_k(std::span<const float> logits, int k, std::span<std::int32_t> out_ids) {
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int32_t a, std::int32_t b) {
    const float xa = logits[static_cast<std::size_t>(a)], xb = logits[static_cast<std::size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  });
  std::copy_n(ids.begin(), k, out_ids.begin());
}

// The plainest argmax: one scalar loop, strictly greater so the first of equal maxima wins.
std::int32_t scalar_argmax(std::span<const float> logits) {
  std::int32_t best = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<std::int32_t>(i);
    }
  }
  return best;
}

const bool registered = nucleus::bench::register_top_k_kernel("partial_sort", partial_sort_top_k) &&
                        nucleus::bench::register_argmax_kernel("scalar_loop", scalar_argmax);

}  // namespace
