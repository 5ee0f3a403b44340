// The logit processors a request may carry: masks, logit_bias, repetition / presence / frequency
// penalties, min_tokens. They write one processed float row into the workspace: one pass that
// widens the row and applies the bitmask, then edits that touch only the listed tokens, so the
// penalties cost O(history), never O(V).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/engine/history_penalties.hpp"
#include "nucleus/engine/params.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {
struct row_request;
}

namespace nucleus::detail {

class processors {
 public:
  processors(const sampling_params& p, engine_order order)
      : bias_(p.logit_bias),
        allowed_(p.allowed_token_ids),
        banned_(p.banned_token_ids),
        eos_(p.eos_token_ids),
        min_tokens_(static_cast<std::size_t>(p.min_tokens)),
        repetition_(p.repetition_penalty),
        presence_(p.presence_penalty),
        frequency_(p.frequency_penalty),
        last_n_(p.penalty_last_n),
        dry_{p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_sequence_breakers},
        dry_last_n_(p.dry_penalty_last_n),
        no_repeat_(static_cast<std::size_t>(p.no_repeat_ngram_size)),
        order_(order) {
    auto widen = [this](std::int32_t t) { max_id_ = std::max<long long>(max_id_, t); };
    for (const token_bias& b : bias_) widen(b.token);
    for (std::int32_t t : allowed_) widen(t);
    for (std::int32_t t : banned_) widen(t);
    if (min_tokens_ > 0)
      for (std::int32_t t : eos_) widen(t);
  }

  // Whether this row needs a processed copy at all (otherwise the chain reads the caller's row).
  template <class Request>
  bool active(const Request& rq) const noexcept {
    return !rq.bitmask.empty() || !allowed_.empty() || !banned_.empty() || !bias_.empty() ||
           (rq.output.size() < min_tokens_ && !eos_.empty()) || repeats(rq) || counted(rq) || dries(rq) ||
           (no_repeat_ > 0 && !ngram_history(rq).empty());
  }

  // Every id the params name, and every history id a penalty reads, lies in [0, vocab), and the
  // bitmask covers the row. (A history no penalty reads is not looked at.)
  template <class Request>
  bool fits(std::size_t vocab, const Request& rq) const noexcept {
    if (max_id_ >= 0 && static_cast<std::size_t>(max_id_) >= vocab) return false;
    if (!rq.bitmask.empty() && rq.bitmask.size() < (vocab + 31) / 32) return false;
    if (repetition_ != 1.0f && !repetition_history(rq).fits(vocab)) return false;
    if ((presence_ != 0.0f || frequency_ != 0.0f) && !counted_history(rq).fits(vocab)) return false;
    if (dry_.multiplier > 0.0f && !dry_history(rq).fits(vocab)) return false;
    if (no_repeat_ > 0 && !ngram_history(rq).fits(vocab)) return false;
    return true;
  }

  // Writes the processed row into ws.processed and returns it (docs/semantics.md, steps 1-4).
  template <logit_type T, class Request>
  const float* apply(std::span<const T> row, workspace& ws, const Request& rq) const {
    const std::size_t v = row.size();
    float* out = ws.processed.ensure(v);
    masked_copy(row.data(), v, rq.bitmask, out);
    edit_tokens(out, v, ws, rq);
    return out;
  }

  // The same processed values for ids [v0, v0 + slice.size()) of a row of `vocab` logits, from that
  // slice alone (sharded sampling: nucleus/sharded), into ws.processed[0, slice.size()). The edits
  // that fall outside the slice are dropped: O(slice + history), never O(vocab).
  template <logit_type T, class Request>
  const float* apply_slice(std::span<const T> slice, std::size_t v0, std::size_t vocab, workspace& ws,
                           const Request& rq) const {
    const std::size_t n = slice.size();
    float* out = ws.processed.ensure(n);
    masked_copy_slice(slice.data(), v0, n, rq.bitmask, out);
    edit_tokens(row_window{out, v0, n}, vocab, ws, rq);
    return out;
  }

 private:
  // Part of a row, indexed by token id: ids outside [v0, v0 + n) read as -inf, and writes to them
  // are dropped (a processor edit never changes -inf, so nothing is lost).
  struct row_window {
    float* data;
    std::size_t v0, n;
    float sink = 0.0f;
    float& operator[](std::int32_t t) noexcept {
      const std::size_t i = static_cast<std::size_t>(t) - v0;  // wraps past n for t < v0
      if (i < n) return data[i];
      sink = -inf();
      return sink;
    }
  };

  // Steps 2-4 (docs/semantics.md): edits of the listed tokens only, on the widened, masked row. `out`
  // is the row (float*) or a row_window.
  template <class Row, class Request>
  void edit_tokens(Row&& out, std::size_t v, workspace& ws, const Request& rq) const {
    for (std::int32_t t : banned_) out[t] = -inf();
    if (rq.output.size() < min_tokens_)
      for (std::int32_t t : eos_) out[t] = -inf();
    for (const token_bias& b : bias_) edit(out[b.token], out[b.token] + b.bias);
    if (repeats(rq) || counted(rq)) penalize(out, ws.counts.ensure_zeroed(v), rq);
    if (dries(rq)) {
      const history h = dry_history(rq);
      // The rank-key buffer is free while processors run and holds V entries (workspace::reserve),
      // so histories up to V tokens need no allocation.
      apply_dry(dry_, h, out, ws.keys.ensure(h.size()), ws.counts.ensure_zeroed(v), edit);
    }
    if (no_repeat_ > 0) apply_no_repeat_ngram(no_repeat_, ngram_history(rq), out);
  }

  static constexpr std::uint32_t seen = 0x80000000u;  // high bit of a count: "already penalized"

  // A processor never changes -inf (banned), +inf (forced) or NaN, and never makes a finite logit
  // infinite: results beyond float's range are clamped to +-FLT_MAX.
  static void edit(float& x, float to) noexcept {
    if (!(x > -inf() && x < inf())) return;
    constexpr float big = std::numeric_limits<float>::max();
    x = to > big ? big : to < -big ? -big : to;
  }

  template <class Request>
  bool dries(const Request& rq) const noexcept {
    return dry_.multiplier > 0.0f && dry_last_n_ != 0 &&
           dry_history(rq).size() > static_cast<std::size_t>(dry_.allowed_length);
  }
  // DRY and no-repeat-ngram read the whole sequence, prompt included (as llama.cpp's and HF's do).
  template <class Request>
  history dry_history(const Request& rq) const noexcept {
    return last_tokens(rq.prompt, rq.output, dry_last_n_);
  }
  template <class Request>
  history ngram_history(const Request& rq) const noexcept {
    return {rq.prompt, rq.output};
  }

  template <class Request>
  bool repeats(const Request& rq) const noexcept {
    return repetition_ != 1.0f && !repetition_history(rq).empty();
  }
  template <class Request>
  bool counted(const Request& rq) const noexcept {
    return (presence_ != 0.0f || frequency_ != 0.0f) && !counted_history(rq).empty();
  }

  template <class Request>
  history repetition_history(const Request& rq) const noexcept {
    if (order_ == engine_order::llama_cpp) return last_tokens(rq.prompt, rq.output, last_n_);
    return {rq.prompt, rq.output};
  }
  template <class Request>
  history counted_history(const Request& rq) const noexcept {
    if (order_ == engine_order::llama_cpp) return last_tokens(rq.prompt, rq.output, last_n_);
    return {{}, rq.output};
  }

  // Widens the row to float; with allowed ids or a bitmask, every other token becomes -inf.
  template <logit_type T>
  void masked_copy(const T* x, std::size_t v, std::span<const std::uint32_t> mask, float* out) const {
    if (!allowed_.empty()) {
      std::fill(out, out + v, -inf());
      for (std::int32_t t : allowed_) {
        const auto i = static_cast<std::size_t>(t);
        if (mask.empty() || (mask[i / 32] >> (i % 32)) & 1u) out[i] = to_float(x[i]);
      }
      return;
    }
    masked_widen(x, v, mask.empty() ? nullptr : mask.data(), out);
  }

  // masked_copy for the ids [v0, v0 + n) of a row, into out[0, n): the bitmask's bits are the row's.
  template <logit_type T>
  void masked_copy_slice(const T* x, std::size_t v0, std::size_t n, std::span<const std::uint32_t> mask,
                         float* out) const {
    if (!allowed_.empty()) {
      std::fill(out, out + n, -inf());
      for (std::int32_t t : allowed_) {
        const auto i = static_cast<std::size_t>(t);
        if (i >= v0 && i - v0 < n && (mask.empty() || (mask[i / 32] >> (i % 32)) & 1u))
          out[i - v0] = to_float(x[i - v0]);
      }
      return;
    }
    if (mask.empty()) return masked_widen(x, n, nullptr, out);
    std::size_t i = 0;  // up to the first id on a word boundary one at a time, then by words
    for (; i < n && (v0 + i) % 32 != 0; ++i)
      out[i] = (mask[(v0 + i) / 32] >> ((v0 + i) % 32)) & 1u ? to_float(x[i]) : -inf();
    if (i < n) masked_widen(x + i, n - i, mask.data() + (v0 + i) / 32, out + i);
  }

  // counts[] is all zero on entry and on exit; only history tokens are touched.
  template <class Row, class Request>
  void penalize(Row&& out, std::uint32_t* counts, const Request& rq) const {
    if (repeats(rq)) {
      const history h = repetition_history(rq);
      const float r = repetition_;
      h.each([&](std::int32_t t) {
        if (counts[t] & seen) return;
        counts[t] |= seen;
        edit(out[t], out[t] > 0.0f ? out[t] / r : out[t] * r);
      });
      h.each([&](std::int32_t t) { counts[t] = 0; });
    }
    if (counted(rq)) {
      const history h = counted_history(rq);
      h.each([&](std::int32_t t) { ++counts[t]; });
      h.each([&](std::int32_t t) {
        if (counts[t] == 0) return;  // this token was already done
        edit(out[t], out[t] - (mul_rounded(static_cast<float>(counts[t]), frequency_) + presence_));
        counts[t] = 0;
      });
    }
  }

  std::vector<token_bias> bias_;
  std::vector<std::int32_t> allowed_, banned_, eos_;
  std::size_t min_tokens_;
  float repetition_, presence_, frequency_;
  long long last_n_;
  dry_params dry_;
  long long dry_last_n_;
  std::size_t no_repeat_;
  engine_order order_;
  long long max_id_ = -1;
};

}  // namespace nucleus::detail
