// The keys and values of every layer of a decoder for a fixed context, allocated once.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Core>

namespace nucleus::model {

// Keys and values of every layer for up to context() positions, allocated once. Each KV head's rows
// are contiguous ([n_kv_heads * context, head_dim] per layer), so attention over the first n
// positions of a head reads one dense block.
class kv_cache {
 public:
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  kv_cache() = default;
  kv_cache(std::int64_t n_layers, std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t context)
      : context_(context),
        keys_(static_cast<std::size_t>(n_layers), matrix(n_kv_heads * context, head_dim)),
        values_(static_cast<std::size_t>(n_layers), matrix(n_kv_heads * context, head_dim)) {}

  std::int64_t context() const noexcept { return context_; }
  std::int64_t size() const noexcept { return size_; }  // positions written so far
  void clear() noexcept { size_ = 0; }
  void advance(std::int64_t n) noexcept { size_ += n; }

  float* key_row(std::int64_t layer, std::int64_t head, std::int64_t pos) noexcept {
    return keys_[static_cast<std::size_t>(layer)].row(head * context_ + pos).data();
  }
  float* value_row(std::int64_t layer, std::int64_t head, std::int64_t pos) noexcept {
    return values_[static_cast<std::size_t>(layer)].row(head * context_ + pos).data();
  }
  // The first n positions of one head: an n x head_dim block.
  auto keys(std::int64_t layer, std::int64_t head, std::int64_t n) const noexcept {
    return keys_[static_cast<std::size_t>(layer)].middleRows(head * context_, n);
  }
  auto values(std::int64_t layer, std::int64_t head, std::int64_t n) const noexcept {
    return values_[static_cast<std::size_t>(layer)].middleRows(head * context_, n);
  }

 private:
  std::int64_t context_ = 0;
  std::int64_t size_ = 0;
  std::vector<matrix> keys_;
  std::vector<matrix> values_;
};

}  // namespace nucleus::model
