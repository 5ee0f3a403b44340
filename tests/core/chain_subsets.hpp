// The ordered subsets of {temperature, top_k, top_p, min_p} as compile-time chains, each beside its
// reference chain, for the chain tests (tests/core/chain_*.cpp: each test its own unit, so the
// 250-odd chain types compile on every core).
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "reference/cases.hpp"

namespace nucleus_chain_subsets {

namespace nc = nucleus;
namespace ref = nucleus_ref;

// Every ordered subset of {temperature, top_k, top_p, min_p}: 1 + 4 + 12 + 24 + 24 = 65 chains.
// A chain is encoded as base-5 digits (1..4 = op), most significant first.
constexpr auto ordered_subsets() {
  std::array<int, 65> out{};
  std::size_t n = 0;
  for (int code = 0; code < 5 * 5 * 5 * 5; ++code) {
    int digits[4] = {code / 125, code / 25 % 5, code / 5 % 5, code % 5};
    bool seen[5] = {}, ok = true, started = false;
    for (int d : digits) {
      if (d == 0) {
        if (started) ok = false;  // zeros only as leading padding
        continue;
      }
      started = true;
      if (seen[d]) ok = false;
      seen[d] = true;
    }
    if (ok) out[n++] = code;
  }
  return out;
}
constexpr auto subsets = ordered_subsets();
static_assert(subsets[64] != 0, "65 ordered subsets");

constexpr std::size_t length(int code) {
  return code >= 125 ? 4 : code >= 25 ? 3 : code >= 5 ? 2 : code >= 1 ? 1 : 0;
}
constexpr int digit(int code, std::size_t i) {  // i-th op, first = most significant
  int div = 1;
  for (std::size_t k = i + 1; k < length(code); ++k) div *= 5;
  return code / div % 5;
}

struct params {
  float T = 0.8f;
  int k = 40;
  float p = 0.9f;
  float m = 0.05f;
};

template <int D>
auto lib_stage(const params& q) {
  if constexpr (D == 1)
    return nc::temperature(q.T);
  else if constexpr (D == 2)
    return nc::top_k(q.k);
  else if constexpr (D == 3)
    return nc::top_p(q.p);
  else
    return nc::min_p(q.m);
}

inline ref::stage ref_stage(int d, const params& q) {
  switch (d) {
    case 1:
      return ref::temperature(q.T);
    case 2:
      return ref::top_k(q.k);
    case 3:
      return ref::top_p(q.p);
    default:
      return ref::min_p(q.m);
  }
}

template <int Code, std::size_t... I>
auto lib_proc(const params& q, std::index_sequence<I...>) {
  return (lib_stage<digit(Code, I)>(q) | ...);
}

inline std::vector<ref::stage> ref_chain(int code, const params& q) {
  std::vector<ref::stage> out;
  for (std::size_t i = 0; i < length(code); ++i) out.push_back(ref_stage(digit(code, i), q));
  return out;
}

// fn(code, proc, stages) for every non-empty ordered subset.
template <class F>
void for_each_subset(const params& q, F&& fn) {
  [&]<std::size_t... S>(std::index_sequence<S...>) {
    (
        [&] {
          constexpr int code = subsets[S];
          if constexpr (code != 0)
            fn(code, lib_proc<code>(q, std::make_index_sequence<length(code)>{}), ref_chain(code, q));
        }(),
        ...);
  }
  (std::make_index_sequence<subsets.size()>{});
}

}  // namespace nucleus_chain_subsets
