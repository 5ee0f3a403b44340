// Caller-owned scratch for one row at a time. Buffers grow to the largest row seen and are then
// reused, so calls after the first allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "nucleus/core/result.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

namespace detail {

template <class T>
class buffer {
 public:
  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t capacity() const noexcept { return capacity_; }
  // Like ensure(), but a grown buffer starts all zero (for buffers kept zero between uses).
  T* ensure_zeroed(std::size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique<T[]>(n);
      capacity_ = n;
    }
    return data_.get();
  }
  T* ensure(std::size_t n) {
    if (n > capacity_) {
      std::size_t grown = capacity_ + capacity_ / 2;
      std::size_t c = n > grown ? n : grown;
      data_ = std::make_unique_for_overwrite<T[]>(c);
      capacity_ = c;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t capacity_ = 0;
};

}  // namespace detail

class workspace {
 public:
  workspace() = default;
  explicit workspace(std::size_t vocab) { reserve(vocab); }
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;
  workspace(workspace&&) noexcept = default;
  workspace& operator=(workspace&&) noexcept = default;

  // Sizes every buffer for rows of up to `vocab` logits, so even the first call allocates nothing.
  void reserve(std::size_t vocab) {
    vals.ensure(vocab + detail::compact_slack);
    ids.ensure(vocab + detail::compact_slack);
    probs.ensure(vocab);
    keys.ensure(vocab);
    blocks.ensure(vocab / detail::block_elems + 1);
    block_scratch.ensure(detail::block_elems);
    hist_mass.ensure(detail::hist_bins);
    top.ensure(64);
  }

  // Internal buffers; stages written outside the library may use them through row_state.
  detail::buffer<float> vals;            // candidate logits
  detail::buffer<std::int32_t> ids;      // candidate token ids
  detail::buffer<float> probs;           // exp values / probabilities of the candidates
  detail::buffer<std::uint64_t> keys;    // packed (value, id) sort keys
  detail::buffer<std::uint64_t> blocks;  // per-block weight sums
  detail::buffer<float> block_scratch;
  detail::buffer<detail::wsum> hist_mass;  // top-p's histogram of weight per bin
  detail::buffer<token_logprob> top;
  // Engine layer (nucleus/engine/): the processed row, and per-token history counts kept all zero
  // between rows.
  detail::buffer<float> processed;
  detail::buffer<std::uint32_t> counts;
};

}  // namespace nucleus
