// Reads .safetensors weight files (F32, F16, BF16), with metadata from a JSON config.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nucleus/io/detail/checked.hpp"
#include "nucleus/io/detail/mapped_file.hpp"
#include "nucleus/io/dtype.hpp"
#include "nucleus/io/error.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/io/tensor.hpp"
#include "nucleus/io/weight_source.hpp"

namespace nucleus::io {

// Reads a JSON file such as a Hugging Face config.json; format_error naming the file if it is not JSON.
inline nlohmann::json load_json_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw format_error(path.string(), "file", "cannot be opened");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw format_error(path.string(), "JSON", e.what());
  }
}

namespace detail {

inline std::optional<metadata_value> json_to_metadata(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::boolean:
      return metadata_value(j.get<bool>());
    case nlohmann::json::value_t::number_unsigned:
      return metadata_value(j.get<std::uint64_t>());
    case nlohmann::json::value_t::number_integer:
      return metadata_value(j.get<std::int64_t>());
    case nlohmann::json::value_t::number_float:
      return metadata_value(j.get<double>());
    case nlohmann::json::value_t::string:
      return metadata_value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      metadata_array a;
      for (const auto& e : j) {
        if (auto v = json_to_metadata(e)) {
          if (a.values.empty()) a.element_type = type_of(*v);
          a.values.push_back(std::move(*v));
        }
      }
      return metadata_value(std::move(a));
    }
    default:
      return std::nullopt;  // null; objects are flattened by the caller
  }
}

// {"rope_scaling": {"factor": 2}} becomes "rope_scaling.factor"; nulls are absent keys.
inline void flatten_json(const nlohmann::json& j, const std::string& prefix,
                         std::map<std::string, metadata_value, std::less<>>& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string full = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      flatten_json(value, full, out);
    } else if (auto v = json_to_metadata(value)) {
      out.insert_or_assign(full, std::move(*v));
    }
  }
}

}  // namespace detail

// A .safetensors file (F32, F16 and BF16 tensors), memory-mapped. Metadata comes from a JSON config
// (config.json beside the file, when present) under its own keys, e.g. "hidden_size"; the header's
// "__metadata__" strings appear as "__metadata__.<key>".
class safetensors_file : public detail::metadata_lookups<safetensors_file> {
 public:
  // Header larger than this is refused as a likely corruption (the format's own reader uses 100 MB).
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  // config: a JSON file to expose as metadata; by default config.json in the same folder, if any.
  static safetensors_file open(const std::filesystem::path& path,
                               std::optional<std::filesystem::path> config = std::nullopt) {
    safetensors_file f;
    f.path_ = path.string();
    f.map_ = detail::mapped_file::open(path);
    f.parse_bytes(f.map_.bytes());
    if (!config) {
      auto beside = path.parent_path() / "config.json";
      if (std::filesystem::exists(beside)) config = std::move(beside);
    }
    if (config) f.add_config(load_json_config(*config));
    return f;
  }

  // Parses bytes the caller keeps alive; name stands for the file in errors.
  static safetensors_file parse(std::span<const std::byte> bytes, std::string name) {
    safetensors_file f;
    f.path_ = std::move(name);
    f.parse_bytes(bytes);
    return f;
  }

  // Exposes a JSON object's keys as metadata (nested objects as dotted keys); later keys win.
  void add_config(const nlohmann::json& config) { detail::flatten_json(config, "", metadata_); }

  const tensor_view* find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
  }
  const metadata_value* find_metadata(std::string_view key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
  }
  std::string_view path() const { return path_; }
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const tensor_view& t : tensors_) names.push_back(t.name);
    return names;
  }
  const std::vector<tensor_view>& tensors() const { return tensors_; }  // in data order

 private:
  safetensors_file() = default;

  [[noreturn]] void fail(std::string field, std::string_view what) const {
    throw format_error(path_, std::move(field), what);
  }

  static std::optional<dtype> parse_dtype(std::string_view s) {
    if (s == "F32") return dtype::f32;
    if (s == "F16") return dtype::f16;
    if (s == "BF16") return dtype::bf16;
    return std::nullopt;
  }

  void parse_bytes(std::span<const std::byte> bytes) {
    if (bytes.size() < 8)
      fail("header length", "file is " + std::to_string(bytes.size()) + " bytes, less than 8 (truncated)");
    std::uint64_t header_len;
    std::memcpy(&header_len, bytes.data(), 8);
    if (header_len > bytes.size() - 8 || header_len > max_header_bytes) {
      fail("header length", std::to_string(header_len) + " exceeds the " + std::to_string(bytes.size() - 8) +
                                " bytes after it (or the " + std::to_string(max_header_bytes) +
                                "-byte limit)");
    }
    const auto header_text = std::string_view(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(header_text);
    } catch (const nlohmann::json::exception& e) {
      fail("header", std::string("invalid JSON: ") + e.what());
    }
    if (!header.is_object()) fail("header", "is not a JSON object");

    const std::span<const std::byte> data = bytes.subspan(8 + header_len);
    struct extent {
      std::uint64_t begin, end;
      std::size_t index;
    };
    std::vector<extent> extents;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) fail("__metadata__", "is not a JSON object");
        for (const auto& [key, value] : entry.items()) {
          if (auto v = detail::json_to_metadata(value))
            metadata_.insert_or_assign("__metadata__." + key, std::move(*v));
        }
        continue;
      }
      const std::string label = "tensor '" + name + "'";
      if (!entry.is_object()) fail(label, "entry is not a JSON object");
      const auto dtype_it = entry.find("dtype");
      const auto shape_it = entry.find("shape");
      const auto offsets_it = entry.find("data_offsets");
      if (dtype_it == entry.end() || !dtype_it->is_string()) fail(label, "dtype is missing or not a string");
      if (shape_it == entry.end() || !shape_it->is_array()) fail(label, "shape is missing or not an array");
      if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
          !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
        fail(label, "data_offsets must be two non-negative integers");
      }
      const auto type_name = dtype_it->get<std::string>();
      const auto type = parse_dtype(type_name);
      if (!type) fail(label, "dtype " + type_name + " is not supported (only F32, F16, BF16)");

      tensor_view t;
      t.name = name;
      t.type = *type;
      std::uint64_t numel = 1;
      for (const auto& d : *shape_it) {
        if (!d.is_number_unsigned()) fail(label, "shape holds " + d.dump() + ", not a non-negative integer");
        const auto dim = d.get<std::uint64_t>();
        const auto product = detail::checked_mul(numel, dim);
        if (dim > static_cast<std::uint64_t>(INT64_MAX) || !product ||
            *product > static_cast<std::uint64_t>(INT64_MAX)) {
          fail(label, "element count overflows int64");
        }
        numel = *product;
        t.shape.push_back(static_cast<std::int64_t>(dim));
      }
      const auto begin = (*offsets_it)[0].get<std::uint64_t>();
      const auto end = (*offsets_it)[1].get<std::uint64_t>();
      if (begin > end || end > data.size()) {
        fail(label, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        ") are outside the data section of " + std::to_string(data.size()) + " bytes");
      }
      const auto expected = detail::checked_mul(numel, static_cast<std::uint64_t>(block_bytes(t.type)));
      if (!expected || *expected != end - begin) {
        fail(label, "data_offsets span " + std::to_string(end - begin) + " bytes but shape and dtype need " +
                        (expected ? std::to_string(*expected) : std::string("more")));
      }
      t.bytes = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
      extents.push_back({begin, end, tensors_.size()});
      tensors_.push_back(std::move(t));
    }

    // Tensors may not share bytes; list them in data order, as writers lay them out. An empty tensor
    // owns no bytes, so it overlaps nothing, wherever its offsets point (the safetensors package
    // writes [24, 24] next to [24, 32]). The full key makes the order independent of the sort.
    std::sort(extents.begin(), extents.end(), [](const extent& a, const extent& b) {
      return std::tie(a.begin, a.end, a.index) < std::tie(b.begin, b.end, b.index);
    });
    const extent* previous = nullptr;  // the last non-empty extent
    for (const extent& e : extents) {
      if (e.begin == e.end) continue;
      if (previous && e.begin < previous->end) {
        fail("tensor '" + tensors_[e.index].name + "'",
             "data overlaps tensor '" + tensors_[previous->index].name + "'");
      }
      previous = &e;
    }
    std::vector<tensor_view> ordered;
    ordered.reserve(tensors_.size());
    for (const extent& e : extents) ordered.push_back(std::move(tensors_[e.index]));
    tensors_ = std::move(ordered);
    for (std::size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
  }

  detail::mapped_file map_;
  std::string path_;
  std::vector<tensor_view> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
  std::map<std::string, metadata_value, std::less<>> metadata_;
};

static_assert(weight_source<safetensors_file>);

}  // namespace nucleus::io
