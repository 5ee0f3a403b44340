// The harness's correctness check must turn wrong kernels away: each kernel here is subtly wrong
// (the kind of bug a fast kernel really has), and each must be rejected; the correct ones must pass;
// and run() with --nucleus_strict must refuse to time anything while a rejected kernel is queued.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace nb = nucleus::bench;

namespace {

std::vector<std::int32_t> iota_ids(std::size_t n) {
  std::vector<std::int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

template <class Less>
void sorted_top_k(std::span<const float> x, int k, std::span<std::int32_t> out, Less less) {
  std::vector<std::int32_t> ids = iota_ids(x.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), less);
  std::copy_n(ids.begin(), k, out.begin());
}

void right_top_k(std::span<const float> x, int k, std::span<std::int32_t> out) {
  sorted_top_k(x, k, out,
               [&](std::int32_t a, std::int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
}

// Ties go to the higher id.
void ties_reversed_top_k(std::span<const float> x, int k, std::span<std::int32_t> out) {
  sorted_top_k(x, k, out,
               [&](std::int32_t a, std::int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a > b); });
}

// The right set, not sorted: selection without the final sort.
void unsorted_top_k(std::span<const float> x, int k, std::span<std::int32_t> out) {
  std::vector<std::int32_t> ids = iota_ids(x.size());
  std::nth_element(ids.begin(), ids.begin() + (k - 1), ids.end(),
                   [&](std::int32_t a, std::int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  std::reverse(ids.begin(), ids.begin() + k);
  std::copy_n(ids.begin(), k, out.begin());
}

// A vector loop that forgets the tail: the last V % 16 logits are never looked at.
void no_tail_top_k(std::span<const float> x, int k, std::span<std::int32_t> out) {
  right_top_k(x.first(std::max<std::size_t>(x.size() / 16 * 16, static_cast<std::size_t>(k))), k, out);
}

std::int32_t right_argmax(std::span<const float> x) {
  return static_cast<std::int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// >= instead of >: the last of equal maxima wins.
std::int32_t last_tie_argmax(std::span<const float> x) {
  std::int32_t best = 0;
  for (std::size_t i = 1; i < x.size(); ++i)
    if (x[i] >= x[static_cast<std::size_t>(best)]) best = static_cast<std::int32_t>(i);
  return best;
}

std::int32_t no_tail_argmax(std::span<const float> x) {
  return right_argmax(x.first(std::max<std::size_t>(x.size() / 16 * 16, 1)));
}

int failures = 0;

void expect(bool ok, const char* what, const nb::check_result& r) {
  std::printf("%s: %s%s%s\n", ok ? "ok  " : "FAIL", what, r.message.empty() ? "" : " -- ", r.message.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, nb::top_k_kernel> wrong_top_k[] = {
      {"top-k with ties to the higher id is rejected", ties_reversed_top_k},
      {"top-k without the final sort is rejected", unsorted_top_k},
      {"top-k that skips the tail is rejected", no_tail_top_k},
  };
  for (const auto& [what, kernel] : wrong_top_k) {
    const nb::check_result r = nb::check_top_k_kernel(kernel);
    expect(!r.ok && !r.message.empty(), what, r);
  }
  const std::pair<const char*, nb::argmax_kernel> wrong_argmax[] = {
      {"argmax with ties to the last index is rejected", last_tie_argmax},
      {"argmax that skips the tail is rejected", no_tail_argmax},
  };
  for (const auto& [what, kernel] : wrong_argmax) {
    const nb::check_result r = nb::check_argmax_kernel(kernel);
    expect(!r.ok && !r.message.empty(), what, r);
  }
  {
    const nb::check_result r = nb::check_top_k_kernel(right_top_k);
    expect(r.ok, "a correct top-k passes", r);
  }
  {
    const nb::check_result r = nb::check_argmax_kernel(right_argmax);
    expect(r.ok, "a correct argmax passes", r);
  }

  // End to end: with a wrong kernel queued, a strict run refuses (and benchmarks nothing).
  nb::register_top_k_kernel("ties_reversed", ties_reversed_top_k);
  nb::register_argmax_kernel("right", right_argmax);
  std::vector<char*> args(argv, argv + argc);
  char strict[] = "--nucleus_strict";
  char filter[] = "--benchmark_filter=^$";
  args.push_back(strict);
  args.push_back(filter);
  const int rc = nb::run(static_cast<int>(args.size()), args.data());
  expect(rc != 0, "run(--nucleus_strict) fails while a rejected kernel is queued", {});

  std::printf("%s\n", failures == 0 ? "all expectations met" : "some expectations failed");
  return failures == 0 ? 0 : 1;
}
