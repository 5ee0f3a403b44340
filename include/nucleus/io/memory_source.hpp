// A weight source over tensors and metadata the caller supplies in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nucleus/io/detail/checked.hpp"
#include "nucleus/io/dtype.hpp"
#include "nucleus/io/error.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/io/tensor.hpp"
#include "nucleus/io/weight_source.hpp"

namespace nucleus::io {

// Tensors and metadata the caller supplies: weights already in an engine's memory, or test data.
// Borrowed bytes must outlive the source; owned ones live in it. Views stay put as more are added.
class memory_source : public detail::metadata_lookups<memory_source> {
 public:
  explicit memory_source(std::string name = "<memory>") : name_(std::move(name)) {}

  // Borrows bytes; checks that they hold exactly shape's elements of type.
  const tensor_view& add_tensor(std::string name, std::vector<std::int64_t> shape, dtype type,
                                std::span<const std::byte> bytes) {
    const std::string label = "tensor '" + name + "'";
    if (tensors_.contains(name)) throw format_error(name_, label, "added twice");
    std::uint64_t numel = 1;
    for (std::int64_t d : shape) {
      const auto product = d < 0 ? std::nullopt : detail::checked_mul(numel, static_cast<std::uint64_t>(d));
      if (!product || *product > static_cast<std::uint64_t>(INT64_MAX)) {
        throw format_error(name_, label, "negative dimension or element count overflow");
      }
      numel = *product;
    }
    const auto cols = shape.empty() ? 1 : shape.back();
    if (cols % block_elements(type) != 0) {
      throw format_error(name_, label,
                         "row length " + std::to_string(cols) + " is not a multiple of the " +
                             std::string(io::name(type)) + " block size");
    }
    const auto expected = detail::checked_mul(numel / static_cast<std::uint64_t>(block_elements(type)),
                                              static_cast<std::uint64_t>(block_bytes(type)));
    if (!expected || *expected != bytes.size()) {
      throw format_error(name_, label,
                         "holds " + std::to_string(bytes.size()) + " bytes, shape and " +
                             std::string(io::name(type)) + " need " +
                             (expected ? std::to_string(*expected) : std::string("more")));
    }
    order_.push_back(name);
    std::string key = name;
    return tensors_.emplace(std::move(key), tensor_view{std::move(name), std::move(shape), type, bytes})
        .first->second;
  }

  // Borrows f32 values.
  const tensor_view& add_tensor(std::string name, std::vector<std::int64_t> shape,
                                std::span<const float> values) {
    return add_tensor(std::move(name), std::move(shape), dtype::f32, std::as_bytes(values));
  }

  // Takes ownership of the bytes (or the f32 values).
  const tensor_view& add_owned_tensor(std::string name, std::vector<std::int64_t> shape, dtype type,
                                      std::vector<std::byte> bytes) {
    const std::vector<std::byte>& kept = owned_.emplace_back(std::move(bytes));
    try {
      return add_tensor(std::move(name), std::move(shape), type, kept);
    } catch (...) {
      owned_.pop_back();
      throw;
    }
  }
  const tensor_view& add_owned_tensor(std::string name, std::vector<std::int64_t> shape,
                                      std::vector<float> values) {
    const auto bytes = std::as_bytes(std::span<const float>(values));
    return add_owned_tensor(std::move(name), std::move(shape), dtype::f32,
                            std::vector<std::byte>(bytes.begin(), bytes.end()));
  }

  void set_metadata(std::string key, metadata_value value) {
    metadata_.insert_or_assign(std::move(key), std::move(value));
  }

  const tensor_view* find_tensor(std::string_view name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const metadata_value* find_metadata(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
  }
  std::string_view path() const { return name_; }
  std::vector<std::string> tensor_names() const { return order_; }  // in the order added

 private:
  std::string name_;
  std::map<std::string, tensor_view, std::less<>> tensors_;  // node-based: views never move
  std::vector<std::string> order_;
  std::map<std::string, metadata_value, std::less<>> metadata_;
  std::deque<std::vector<std::byte>> owned_;
};

static_assert(weight_source<memory_source>);

}  // namespace nucleus::io
