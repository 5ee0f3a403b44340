// top_k(k): keeps the k highest logits; ties at the boundary go to the lower token id.
#pragma once

#include <cstddef>

#include "nucleus/core/chain.hpp"
#include "nucleus/kernels/select.hpp"

namespace nucleus {

struct top_k_stage : stage<top_k_stage> {
  static constexpr stage_info info{.truncates = true, .sorts = true};

  int k;  // <= 0: disabled

  void apply(row_state& s) const {
    if (k <= 0) return;
    const auto kk = static_cast<std::size_t>(k);
    if (kk >= s.size()) return;  // keeps all
    workspace& ws = s.ws();
    std::uint64_t* keys = ws.keys.ensure(detail::select_capacity(kk));
    const std::size_t n = detail::select_top_k(s.logits(), s.ids_or_null(), s.size(), kk, keys);
    float* v = ws.vals.data();
    std::int32_t* id = ws.ids.data();
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = detail::key_value(keys[i]);
      id[i] = detail::key_id(keys[i]);
    }
    s.assign(n, /*sorted=*/true);
  }
};

inline top_k_stage top_k(int k) noexcept {
  return top_k_stage{{}, k};
}

}  // namespace nucleus
