// top_k(k): keeps the k highest logits; ties at the boundary go to the lower token id. top_k(k, ties,
// min_keep) raises k to min_keep.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "nucleus/core/chain.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

// How top-k treats tokens tied with the k-th: exactly k survive (ties to the lower id, llama.cpp and
// nucleus), or every token tied with the k-th survives too (vLLM and Hugging Face).
enum class ties : std::uint8_t { exact, keep };

struct top_k_stage : stage<top_k_stage> {
  static constexpr stage_info info{.sorts = true};

  int top_k;  // k, the tokens kept; <= 0: disabled
  ties tie_rule = ties::exact;

  void apply(row_state& s) const {
    if (top_k <= 0) return;
    const auto kk = static_cast<std::size_t>(top_k);
    if (kk >= s.size()) return;  // keeps all
    workspace& ws = s.ws();
    // Keeping ties may need room for every candidate (k selected plus the tied rest).
    const std::size_t cap = detail::select_capacity(kk);
    std::uint64_t* keys = ws.keys.ensure(tie_rule == ties::keep && s.size() > cap ? s.size() : cap);
    // Under the keep rule the selection returns the k-th's ties too, unless so many came that it
    // dropped some (maybe_ties, and exactly k returned): only then is the row read again for them.
    bool maybe_ties = false;
    bool* ties_out = tie_rule == ties::keep ? &maybe_ties : nullptr;
    const std::size_t n = s.visit([&](const auto* x) {
      return detail::select_top_k(x, s.ids_or_null(), s.size(), kk, keys, ties_out);
    });
    std::size_t total = n;
    // (before anything is written: the candidates may live in the buffers written below)
    if (maybe_ties) total = n + append_ties(s, keys, n);
    float* v = ws.vals.data();
    std::int32_t* id = ws.ids.data();
    for (std::size_t i = 0; i < total; ++i) {
      v[i] = detail::key_value(keys[i]);
      id[i] = detail::key_id(keys[i]);
    }
    s.assign(total, /*sorted=*/true);
  }

 private:
  // Appends, in rank order, the candidates tied with the k-th that the selection left out (their ids
  // rank after the k-th's). keys holds the selection in [0, k); the ties go to [k, ...).
  static std::size_t append_ties(row_state& s, std::uint64_t* keys, std::size_t k) {
    const std::uint64_t kth = keys[k - 1];
    const float kv = detail::key_value(kth);
    const std::size_t m = s.visit([&](const auto* x) {
      return detail::collect_ties(x, s.ids_or_null(), s.size(), kv, kth, keys, k, s.size());
    });
    std::sort(keys + k, keys + m, std::greater<>{});
    return m - k;
  }
};

inline top_k_stage top_k(int k, ties tie_rule = ties::exact) noexcept {
  return top_k_stage{{}, k, tie_rule};
}
// With a min_keep floor (Hugging Face's min_tokens_to_keep): k is raised to min_keep; k <= 0 still
// disables.
inline top_k_stage top_k(int k, ties tie_rule, int min_keep) {
  const auto floor_k = static_cast<int>(detail::checked_min_keep(min_keep, "top_k"));
  return top_k_stage{{}, k > 0 && k < floor_k ? floor_k : k, tie_rule};
}

}  // namespace nucleus
