// log_softmax, top_logprobs and logprobs_of on a row split by vocabulary: two rounds (the row's
// maximum with each shard's best n, then each shard's exact mass), after which every shard holds the
// whole row's normalizer and top-n and writes its own part, bit for bit what the whole-row ops give.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "nucleus/core/result.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/ops/normalizer.hpp"
#include "nucleus/sharded/message.hpp"

namespace nucleus {

namespace detail {

// Calls f(const T*) with logits stored as `type` (a shard keeps its slice type-erased between rounds).
template <class F>
decltype(auto) visit_logits(const void* data, logit_dtype type, F&& f) {
  if (type == logit_dtype::f32) return f(static_cast<const float*>(data));
  if (type == logit_dtype::bf16) return f(static_cast<const bf16*>(data));
  return f(static_cast<const f16*>(data));
}

// The row's raw normalizer from its shards' parts: the maximum, the count of +inf logits and the
// exact mass below a finite maximum, by normalizer_for's rules.
inline raw_normalizer normalizer_of_parts(float max, std::uint64_t infs, wsum mass) noexcept {
  raw_normalizer r;
  r.max = max;
  if (max == inf()) {
    r.inf_lp = static_cast<float>(-std::log(static_cast<double>(infs)));
  } else if (max > -inf()) {
    r.lse = static_cast<float>(std::log(to_double(mass)));
  }
  return r;
}

// top_raw_logprobs' entries from the row's best keys (with +inf in the row only its +inf tokens
// count); returns how many it wrote.
inline std::size_t raw_top_entries(const raw_normalizer& z, std::span<const std::uint64_t> keys,
                                   std::span<token_logprob> out) noexcept {
  std::size_t shown = 0;
  for (; shown < keys.size() && shown < out.size(); ++shown) {
    const float lp = z(key_value(keys[shown]));
    if (z.max == inf() && lp == -inf()) break;
    out[shown] = {key_id(keys[shown]), lp};
  }
  return shown;
}

}  // namespace detail

class shard_normalizer {
 public:
  // Starts a row: this shard holds ids [v0, v0 + slice.size()); top_n is the whole row's top-n to
  // find (top_logprobs' n; 0 for none). The slice must stay valid until done().
  template <logit_type T>
  void begin(std::span<const T> slice, std::size_t v0, std::size_t top_n, workspace& ws) {
    done_ = false;
    top_n_ = top_n;
    out_.clear(0);
    const T* x = slice.data();
    const std::size_t n = slice.size();
    out_.max = detail::max_value(x, n);
    out_.count = detail::count_greater(x, n, std::numeric_limits<float>::max());  // +inf tokens
    const std::size_t k = std::min(top_n, n);
    if (k > 0) {
      std::uint64_t* keys = ws.keys.ensure(detail::select_capacity(k));
      const std::size_t c = detail::select_top_k(x, nullptr, n, k, keys);
      for (std::size_t i = 0; i < c; ++i)
        out_.keys.push_back(detail::rank_key(detail::key_value(keys[i]),
                                             static_cast<std::int32_t>(v0) + detail::key_id(keys[i])));
    }
    data_ = x;
    type_ = dtype_of<T>;
    n_ = n;
  }

  bool done() const noexcept { return done_; }
  const shard_message& outgoing() const noexcept { return out_; }

  // all[i] is shard i's outgoing(), in vocabulary order.
  template <class Messages>
  void step(const Messages& all) {
    if (out_.round == 0) {
      float max = -detail::inf();
      infs_ = 0;
      for (const shard_message& m : all) {
        max = std::max(max, m.max);
        infs_ += m.count;
      }
      keys_.clear();
      for (const shard_message& m : all) keys_.insert(keys_.end(), m.keys.begin(), m.keys.end());
      std::sort(keys_.begin(), keys_.end(), std::greater<>{});
      keys_.resize(std::min(keys_.size(), top_n_));
      norm_ = detail::normalizer_of_parts(max, infs_, 0);
      if (max > -detail::inf() && max < detail::inf()) {
        out_.clear(1);
        out_.mass = mass(max);
        return;  // one more round: the exact mass below the row's maximum
      }
    } else {
      detail::wsum total = 0;
      for (const shard_message& m : all) total += m.mass;
      norm_ = detail::normalizer_of_parts(norm_.max, infs_, total);
    }
    done_ = true;
  }

  // The whole row's raw (T = 1) normalizer: normalizer(x) is log softmax(row) at a logit x.
  const detail::raw_normalizer& normalizer() const noexcept { return norm_; }
  status row_status() const noexcept { return norm_.no_candidates() ? status::no_candidates : status::ok; }

  // The whole row's top_logprobs(row, top_n) into out; returns the count written.
  std::size_t top(std::span<token_logprob> out) const { return detail::raw_top_entries(norm_, keys_, out); }

  // This shard's part of log_softmax(row): out has the slice's length.
  template <logit_type T>
  void log_softmax(std::span<const T> slice, std::span<float> out) const {
    if (out.size() != slice.size())
      throw std::invalid_argument(
          "nucleus::shard_normalizer::log_softmax: out.size() must equal the slice's");
    if (norm_.no_candidates()) {
      std::fill(out.begin(), out.end(), -detail::inf());
    } else if (norm_.max < detail::inf()) {
      detail::log_softmax_store(slice.data(), slice.size(), norm_.max, norm_.lse, out.data());
    } else {
      for (std::size_t i = 0; i < slice.size(); ++i) out[i] = norm_(to_float(slice[i]));
    }
  }

  // logprobs_of for the ids this shard holds: out[i] = log softmax(row)[ids[i]] where ids[i] lies in
  // [v0, v0 + slice.size()); other entries are left as they are. Returns how many it wrote.
  template <logit_type T>
  std::size_t logprobs_of(std::span<const T> slice, std::size_t v0, std::span<const std::int32_t> ids,
                          std::span<float> out) const {
    if (out.size() != ids.size())
      throw std::invalid_argument("nucleus::shard_normalizer::logprobs_of: out.size() must equal ids.size()");
    std::size_t wrote = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto t = static_cast<std::size_t>(ids[i]);
      if (ids[i] < 0 || t < v0 || t - v0 >= slice.size()) continue;
      out[i] = norm_(to_float(slice[t - v0]));
      ++wrote;
    }
    return wrote;
  }

 private:
  bool done_ = false;
  std::size_t top_n_ = 0;
  shard_message out_;
  detail::raw_normalizer norm_;
  std::vector<std::uint64_t> keys_;
  std::uint64_t infs_ = 0;
  const void* data_ = nullptr;
  logit_dtype type_ = logit_dtype::f32;
  std::size_t n_ = 0;

  detail::wsum mass(float m) const noexcept {
    return detail::visit_logits(data_, type_,
                                [&](const auto* x) { return detail::exp_sum(x, n_, m, 1.0f, nullptr); });
  }
};

}  // namespace nucleus
