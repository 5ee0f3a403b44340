// The processed distribution a chain without a terminal returns: survivors and their probabilities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "nucleus/core/result.hpp"

namespace nucleus {

// A view into a workspace, valid until the next call with that workspace. Order: when sorted() is
// true, by probability descending with ties by ascending id; otherwise by ascending id.
class distribution {
 public:
  distribution() = default;
  distribution(const std::int32_t* ids, const float* probs, std::size_t n, bool sorted,
               nucleus::status s) noexcept
      : ids_(ids), probs_(probs), n_(n), sorted_(sorted), status_(s) {}

  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  std::span<const std::int32_t> ids() const noexcept { return {ids_, n_}; }
  std::span<const float> probs() const noexcept { return {probs_, n_}; }
  bool sorted() const noexcept { return sorted_; }
  nucleus::status status() const noexcept { return status_; }

 private:
  const std::int32_t* ids_ = nullptr;
  const float* probs_ = nullptr;
  std::size_t n_ = 0;
  bool sorted_ = false;
  nucleus::status status_ = nucleus::status::ok;
};

}  // namespace nucleus
