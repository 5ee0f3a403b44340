// The processors that read the history's sequence, not only its counts: DRY (llama.cpp's "don't
// repeat yourself") and no-repeat-ngram (Hugging Face). Both cost O(history) per row (times the
// n-gram or breaker length), never O(V): they touch only tokens the history names.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "nucleus/simd/targets.hpp"

namespace nucleus::detail {

// Two runs of history tokens read as one sequence (the prompt, then the output).
struct history {
  std::span<const std::int32_t> a, b;

  template <class F>
  void each(F&& f) const {
    for (std::int32_t t : a) f(t);
    for (std::int32_t t : b) f(t);
  }
  bool fits(std::size_t vocab) const noexcept {
    auto ok = [vocab](std::span<const std::int32_t> s) {
      return std::all_of(s.begin(), s.end(),
                         [vocab](std::int32_t t) { return t >= 0 && static_cast<std::size_t>(t) < vocab; });
    };
    return ok(a) && ok(b);
  }
  bool empty() const noexcept { return a.empty() && b.empty(); }
  std::size_t size() const noexcept { return a.size() + b.size(); }
  std::int32_t operator[](std::size_t i) const noexcept { return i < a.size() ? a[i] : b[i - a.size()]; }
  // The i-th token from the end (0: the most recent).
  std::int32_t back(std::size_t i) const noexcept { return (*this)[size() - 1 - i]; }
};

// The last n tokens of prompt ++ output (n < 0: all).
inline history last_tokens(std::span<const std::int32_t> prompt, std::span<const std::int32_t> output,
                           long long n) noexcept {
  const std::size_t total = prompt.size() + output.size();
  const std::size_t keep = n < 0 ? total : std::min(total, static_cast<std::size_t>(n));
  const std::size_t skip = total - keep;
  if (skip >= prompt.size()) return {{}, output.subspan(skip - prompt.size())};
  return {prompt.subspan(skip), output};
}

struct dry_params {
  float multiplier = 0.0f;  // 0: off
  float base = 1.75f;       // >= 1
  int allowed_length = 2;   // repeats up to this long are free
  // Each breaker is a token sequence, head first. A repeat never extends across a breaker, and a
  // token that is a breaker by itself is never penalized.
  std::vector<std::vector<std::int32_t>> breakers;
};

// DRY: a token that would extend a repeat of length L >= allowed_length (the longest suffix of the
// history that also occurs earlier, followed there by that token) loses multiplier * base^(L -
// allowed_length) from its logit. `z` is scratch for h.size() entries; `best` is all zero on entry
// and on exit (one per vocabulary token). edit(x, to) is the processors' safe write. `out` is the row
// (float*) or a window onto part of it (processors' row_window), indexed by token id.
template <class Row, class Edit>
void apply_dry(const dry_params& p, const history& h, Row&& out, std::uint64_t* z, std::uint32_t* best,
               Edit&& edit) {
  const std::size_t n = h.size();
  const auto allowed = static_cast<std::size_t>(p.allowed_length);
  if (n <= allowed) return;
  // The most recent breaker caps how far back a repeat may reach.
  std::size_t limit = n;
  for (std::size_t i = 0; i < n && limit == n; ++i) {
    long long longest = -1;
    for (const auto& seq : p.breakers) {
      if (seq.empty() || seq[0] != h.back(i)) continue;
      const std::size_t tail = seq.size() - 1;
      if (static_cast<long long>(tail) <= longest || tail > i) continue;
      bool match = true;
      for (std::size_t o = 0; o < tail && match; ++o) match = seq[1 + o] == h.back(i - o - 1);
      if (match) longest = static_cast<long long>(tail);
    }
    if (longest >= 0) limit = i - static_cast<std::size_t>(longest);
  }
  if (limit < allowed) return;
  // z[k]: the longest common prefix of the reversed history and its suffix from k (the Z-function),
  // i.e. how many tokens before position n-1-k match the tokens before the end.
  z[0] = n;
  std::size_t lt = 0, rt = 0;  // the rightmost match window [lt, rt)
  for (std::size_t k = 1; k < n; ++k) {
    std::size_t len = 0;
    if (k < rt) len = std::min<std::size_t>(rt - k, z[k - lt]);
    while (k + len < n && h.back(len) == h.back(k + len)) ++len;
    z[k] = len;
    if (k + len > rt) {
      lt = k;
      rt = k + len;
    }
  }
  // The token that followed each earlier occurrence would extend the repeat. best[t] holds the
  // longest such repeat plus one (0: none).
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t len = std::min(static_cast<std::size_t>(z[k]), limit);  // z[k] <= n
    if (len < allowed) continue;
    const std::int32_t t = h.back(k - 1);
    best[t] = std::max(best[t], static_cast<std::uint32_t>(len + 1));
  }
  // exp below this keeps base^exp finite in float (llama.cpp's clamp).
  const int max_exp = p.base > 1.000001f ? static_cast<int>(88.7228391f / std::log(p.base)) : 0;
  for (std::size_t k = 1; k < n; ++k) {
    const std::int32_t t = h.back(k - 1);
    if (best[t] == 0) continue;
    const bool breaker = std::any_of(p.breakers.begin(), p.breakers.end(),
                                     [t](const auto& seq) { return seq.size() == 1 && seq[0] == t; });
    if (!breaker) {
      int e = static_cast<int>(best[t] - 1) - p.allowed_length;
      if (max_exp > 0 && e > max_exp) e = max_exp;
      // multiplier * base^e in double, rounded once to float (as llama.cpp's float * pow(float, int)).
      const auto penalty =
          static_cast<float>(static_cast<double>(p.multiplier) * std::pow(static_cast<double>(p.base), e));
      edit(out[t], out[t] - penalty);
    }
    best[t] = 0;
  }
}

// No-repeat-ngram (Hugging Face): with n = size, every token that would complete an n-gram already in
// the history gets -inf. size 1 bans every token of the history. `out` as in apply_dry.
template <class Row>
void apply_no_repeat_ngram(std::size_t size, const history& h, Row&& out) {
  const std::size_t n = h.size();
  if (size == 0 || n + 1 < size) return;
  const std::size_t prefix = size - 1;  // the last size-1 tokens, to be matched
  for (std::size_t j = 0; j + size <= n; ++j) {
    bool match = true;
    for (std::size_t o = 0; o < prefix && match; ++o) match = h[j + o] == h[n - prefix + o];
    if (match) out[h[j + prefix]] = -inf();
  }
}

}  // namespace nucleus::detail
