// The state of one row while a chain runs: the live candidate set, the pending temperature, the
// cached maximum. Stages read and narrow it; nothing here rewrites the caller's logits. What the
// terminals do with it lives with them (stages/argmax.hpp, stages/categorical.hpp) and in
// core/materialize.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>

#include "nucleus/core/distribution.hpp"
#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

class row_state {
 public:
  template <logit_type T>
  row_state(std::span<const T> row, workspace& ws)
      : ws_(ws), src_(row.data()), src_type_(dtype_of<T>), n_(row.size()), row_n_(row.size()) {
    if constexpr (std::same_as<T, float>) vals_ = row.data();
    if (row.empty()) status_ = status::empty_row;
    ws.reserve(row.size());
  }

  // visit(), and stored_size() the row's length, without applying a pending window: for the kernels
  // that read it in place.
  template <class F>
  decltype(auto) visit_stored(F&& f) const {
    if (vals_ || src_type_ == logit_dtype::f32) return f(vals_);
    if (src_type_ == logit_dtype::bf16) return f(static_cast<const bf16*>(src_));
    return f(static_cast<const f16*>(src_));
  }

  // Calls f(const T* x) with the candidates' values in their stored type: the caller's row (float,
  // bf16 or f16) while dense, float in the workspace once narrowed.
  template <class F>
  decltype(auto) visit(F&& f) const {
    settle();
    return visit_stored(f);
  }

  // --- the candidate set -------------------------------------------------------------------
  // Candidates are (logit, id) pairs. While the set is the whole row ("dense") ids are implicit.
  std::size_t size() const noexcept {
    settle();
    return n_;
  }
  // The row's length as given (the vocabulary size), however much has been cut since.
  std::size_t row_size() const noexcept { return row_n_; }
  // The candidates' values as float: null while the set is a dense 16-bit row (use visit()).
  const float* logits() const noexcept {
    settle();
    return vals_;
  }
  const std::int32_t* ids_or_null() const noexcept {
    settle();
    return ids_;
  }
  std::int32_t id(std::size_t i) const noexcept {
    settle();
    return ids_ ? ids_[i] : static_cast<std::int32_t>(i);
  }
  bool dense() const noexcept {
    settle();
    return ids_ == nullptr;
  }
  // Rank order: logit descending, ties by ascending id. Otherwise candidates are in ascending id.
  bool sorted() const noexcept { return sorted_; }
  nucleus::status status() const noexcept { return status_; }
  // False once there is nothing left for a stage to do: no candidates, or an error status.
  bool live() const noexcept { return status_ == status::ok && n_ > 0; }

  // --- temperature ---------------------------------------------------------------------------
  float inv_temperature() const noexcept { return inv_temp_; }
  // A 1/T that overflows float (T below ~3e-39, or a product of temperatures) is the T -> 0 limit:
  // greedy.
  void scale_inv_temperature(float f) noexcept {
    exps_ = nullptr;
    inv_temp_ *= f;
    if (!(inv_temp_ <= std::numeric_limits<float>::max())) greedy_ = true;
  }
  // T = 0: the rest of the chain reduces to the argmax of the current candidates.
  bool greedy() const noexcept { return greedy_; }
  void set_greedy() noexcept { greedy_ = true; }

  // The largest candidate logit, computed once. A row holding +inf keeps exactly its +inf tokens
  // (at equal probability: their logits become 0); a row with nothing above -inf has no candidates.
  float max_logit() noexcept {
    if (has_max_ || !live()) return max_;
    settle();
    max_ = visit([&](const auto* x) { return detail::max_value(x, n_); });
    has_max_ = true;
    if (max_ == -detail::inf()) {
      status_ = status::no_candidates;
      n_ = 0;
    } else if (max_ == detail::inf()) {
      keep_scaled_at_least(0.0f, 1.0f, detail::inf());
      float* v = writable_vals();
      for (std::size_t i = 0; i < n_; ++i) v[i] = 0.0f;
      max_ = 0.0f;
    }
    return max_;
  }

  // Scaled logit of candidate i at the current temperature, relative to the maximum: y <= 0.
  float scaled(std::size_t i) noexcept { return detail::scaled(value(i), max_logit(), inv_temp_); }
  // Candidate i's logit as float.
  float value(std::size_t i) const noexcept {
    return visit([&](const auto* x) { return to_float(x[i]); });
  }

  // --- a pending window ----------------------------------------------------------------------
  // A narrowing that keeps much of a dense row (flat top-p, XTC) need not copy it: it may leave the
  // row whole with a pending value window, the candidates being its logits in [lo, hi] (never -inf or
  // NaN: lo > -inf), in id order as always. The draw reads the window in place (stages/
  // categorical.hpp: exp_sum_in, pick_in, the same weights in the same order as over the copy). Any
  // other look at the candidates applies it first, one compaction (settle()), so a stage or terminal
  // that knows nothing of windows sees exactly the candidates it would have.
  //
  // Keeps the candidates of a dense row in [lo, hi] (lo > -inf), pending; on a narrowed row, at once.
  // `max_in` is the largest logit in the window when the caller knows it (NaN: unknown; the next
  // max_logit() then settles the window and recomputes).
  void keep_window(float lo, float hi, float max_in = std::numeric_limits<float>::quiet_NaN()) noexcept {
    settle();
    const bool max_kept = has_max_ && max_ >= lo && max_ <= hi;
    if (ids_ != nullptr) {
      compact_window(lo, hi);
    } else {
      windowed_ = true;
      win_lo_ = lo;
      win_hi_ = hi;
    }
    exps_ = nullptr;
    if (max_kept) return;
    has_max_ = max_in == max_in;
    if (has_max_) max_ = max_in;
  }
  bool window_pending() const noexcept { return windowed_; }
  // While a window is pending, a stage that has stored exp((x - max) * inv) for every logit of the
  // row (at the current maximum and temperature, as the packs' exp gives it) may lend them to the
  // draw, which then needs no exp pass; with `total`, it has also written the window's weight per
  // block of the row into the workspace's blocks (their sum is total), and the draw goes straight to
  // its pick. Any change to the row, the maximum or the temperature drops them.
  void lend_exps(const float* e, std::optional<detail::wsum> total = std::nullopt) noexcept {
    exps_ = windowed_ ? e : nullptr;
    lent_total_ = total;
  }
  const float* lent_exps() const noexcept { return windowed_ ? exps_ : nullptr; }
  std::optional<detail::wsum> lent_total() const noexcept { return lent_exps() ? lent_total_ : std::nullopt; }
  float window_lo() const noexcept { return win_lo_; }
  float window_hi() const noexcept { return win_hi_; }
  std::size_t stored_size() const noexcept { return n_; }

  // --- narrowing -----------------------------------------------------------------------------
  // Every narrowing keeps the cached maximum only where it proves the maximum survived; otherwise
  // the next max_logit() recomputes it over the candidates left (a stage after a cut that took the
  // top token, typical or xtc say, must read the largest remaining logit, not the row's).

  // Keeps candidates with (logit - shift) * scale >= threshold, in order.
  void keep_scaled_at_least(float shift, float scale, float threshold) noexcept {
    settle();
    n_ = visit([&](const auto* x) {
      return detail::compact_ge(x, ids_, n_, shift, scale, threshold, ws_.vals.data(), ws_.ids.data());
    });
    adopt_workspace();
    // The kernel's own test on the maximum's value: the candidate holding it was kept iff it passes.
    if (has_max_ && !(detail::scaled(max_, shift, scale) >= threshold)) has_max_ = false;
  }
  // Keeps candidates with (logit - max) * scale >= threshold, max the largest candidate logit (a cut
  // relative to the maximum: min-p). A dense row whose maximum is not known yet is read once for both
  // (compact_ge_running, then a compact_ge of the few kept), not a max pass and then a compaction.
  // A row without candidates takes max_logit()'s status and keeps nothing.
  void keep_scaled_near_max(float scale, float threshold) noexcept {
    settle();
    if (live() && !has_max_ && ids_ == nullptr && scale > 0.0f &&
        scale <= std::numeric_limits<float>::max()) {
      float m = 0.0f;
      const std::size_t kept = visit([&](const auto* x) {
        return detail::compact_ge_running(x, n_, scale, threshold, ws_.vals.data(), ws_.ids.data(), &m);
      });
      if (m > -detail::inf() && m < detail::inf()) {  // else max_logit()'s rules for +inf and none
        n_ = detail::compact_ge(ws_.vals.data(), ws_.ids.data(), kept, m, scale, threshold, ws_.vals.data(),
                                ws_.ids.data());
        adopt_workspace();
        max_ = m;  // kept: (m - m) * scale = 0 >= threshold for any cut that keeps anything
        has_max_ = detail::scaled(m, m, scale) >= threshold;
        return;
      }
    }
    const float mx = max_logit();
    if (live()) keep_scaled_at_least(mx, scale, threshold);
  }
  // Keeps candidates for which pred(logit, id) holds, in order (a scalar pass: for custom stages).
  // The maximum is recomputed when next read (one SIMD pass over the survivors): tracking it here
  // would add a compare to every candidate of this scalar loop, which costs more at 248k.
  template <class Pred>
  void keep_if(Pred&& pred) {
    settle();
    float* v = ws_.vals.data();
    std::int32_t* d = ws_.ids.data();
    std::size_t out = 0;
    // Branch-free: every candidate is written, and the cursor advances only for the kept ones (the
    // kept / dropped pattern of an unsorted row is random, and a branch on it mispredicts). In place
    // is safe: out <= i.
    visit([&](const auto* src) {
      for (std::size_t i = 0; i < n_; ++i) {
        const float x = to_float(src[i]);
        const std::int32_t t = ids_ ? ids_[i] : static_cast<std::int32_t>(i);
        v[out] = x;
        d[out] = t;
        const bool keep = pred(x, t);  // evaluated for every candidate: no branch on it
        out += static_cast<std::size_t>(x == x) & static_cast<std::size_t>(x > -detail::inf()) &
               static_cast<std::size_t>(keep);
      }
    });
    n_ = out;
    adopt_workspace();
    has_max_ = false;
  }
  // Keeps the first n candidates (meaningful when sorted(): the maximum, first, survives any n > 0).
  void truncate(std::size_t n) noexcept {
    settle();
    if (n >= n_) return;
    n_ = n;
    if (!sorted_) has_max_ = false;
  }
  // The candidate set is now ws.vals / ws.ids [0, n). In rank order its first value is the maximum;
  // in id order the cut may have taken it.
  void assign(std::size_t n, bool sorted) noexcept {
    windowed_ = false;  // the workspace's candidates replace the row, window and all
    n_ = n;
    adopt_workspace();
    sorted_ = sorted;
    if (has_max_ && sorted && n > 0) {
      max_ = vals_[0];
    } else {
      has_max_ = false;
    }
  }

  workspace& ws() noexcept { return ws_; }

  // --- results ---------------------------------------------------------------------------
  // The result of a row that cannot give a token: its status (no_candidates if it was still ok).
  sample_result fail() const noexcept {
    return {-1, 0.0f, status_ == status::ok ? status::no_candidates : status_};
  }
  void set_status(nucleus::status st) noexcept { status_ = st; }
  // The exp-sum the last draw normalized by (terminals record it; logprobs read it).
  double draw_sum() const noexcept { return draw_sum_; }
  void set_draw_sum(double z) noexcept { draw_sum_ = z; }

 private:
  float* writable_vals() noexcept { return ws_.vals.data(); }
  void adopt_workspace() const noexcept {
    vals_ = ws_.vals.data();
    ids_ = ws_.ids.data();
  }
  // Keeps the candidates in [lo, hi], in order: x >= lo drops NaN and -inf, then -x >= -hi (exact).
  void compact_window(float lo, float hi) const noexcept {
    n_ = visit_stored([&](const auto* x) {
      return detail::compact_ge(x, ids_, n_, 0.0f, 1.0f, lo, ws_.vals.data(), ws_.ids.data());
    });
    adopt_workspace();
    if (hi < detail::inf())
      n_ = detail::compact_ge(vals_, ids_, n_, 0.0f, -1.0f, -hi, ws_.vals.data(), ws_.ids.data());
  }
  // Applies a pending window (the candidate set's accessors call it: it changes which storage holds
  // the same candidates, not the set).
  void settle() const noexcept {
    if (!windowed_) return;
    windowed_ = false;
    exps_ = nullptr;
    compact_window(win_lo_, win_hi_);
  }

  workspace& ws_;
  const void* src_;
  logit_dtype src_type_;
  // Mutable: settle() (from the const accessors) moves the candidates into the workspace.
  mutable const float* vals_ = nullptr;
  mutable const std::int32_t* ids_ = nullptr;
  mutable std::size_t n_;
  std::size_t row_n_;
  float inv_temp_ = 1.0f;
  float max_ = 0.0f;
  double draw_sum_ = 0.0;
  bool has_max_ = false;
  bool greedy_ = false;
  bool sorted_ = false;
  mutable bool windowed_ = false;
  mutable const float* exps_ = nullptr;  // lend_exps()
  std::optional<detail::wsum> lent_total_;
  float win_lo_ = 0.0f, win_hi_ = 0.0f;
  nucleus::status status_ = nucleus::status::ok;
};

}  // namespace nucleus
