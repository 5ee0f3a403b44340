// The weight_source concept (where a model's weights come from) and require_tensor().
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <vector>

#include "nucleus/io/dequantize.hpp"
#include "nucleus/io/error.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/io/tensor.hpp"

namespace nucleus::io {

// Where a model's weights come from: a file format, or memory an engine already owns. Views and
// metadata returned stay valid as long as the source lives (moving it keeps them valid too).
template <class S>
concept weight_source = metadata_source<S> && requires(const S& s, std::string_view key) {
  { s.find_tensor(key) } -> std::same_as<const tensor_view*>;       // nullptr if absent
  { s.find_metadata(key) } -> std::same_as<const metadata_value*>;  // nullptr if absent
  { s.path() } -> std::convertible_to<std::string_view>;            // names the source in errors
  { s.tensor_names() } -> std::convertible_to<std::vector<std::string>>;
};

// The tensor a model cannot do without: format_error naming the source and the tensor when absent.
template <weight_source S>
const tensor_view& require_tensor(const S& s, std::string_view name) {
  if (const tensor_view* t = s.find_tensor(name)) return *t;
  throw format_error(std::string(std::string_view(s.path())), "tensor '" + std::string(name) + "'",
                     "missing");
}

}  // namespace nucleus::io
