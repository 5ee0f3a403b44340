// Reads GGUF weight files (versions 2 and 3): memory-mapped, validated when opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nucleus/io/detail/checked.hpp"
#include "nucleus/io/detail/mapped_file.hpp"
#include "nucleus/io/dtype.hpp"
#include "nucleus/io/error.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/io/tensor.hpp"
#include "nucleus/io/weight_source.hpp"

namespace nucleus::io {

namespace detail {

// Names the field being read, built into a string only when an error needs it: "key 'x'[3][0]".
struct field_ref {
  const field_ref* parent = nullptr;
  std::string_view text;
  std::uint64_t index = 0;

  std::string str() const {
    if (parent == nullptr) return std::string(text);
    return parent->str() + "[" + std::to_string(index) + "]";
  }
};

// Every read checks the bytes left; every count is weighed against them before anything is allocated.
class gguf_parser {
 public:
  static constexpr int max_array_depth = 64;

  gguf_parser(std::span<const std::byte> data, const std::string& file) : data_(data), file_(file) {}

  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return data_.size() - pos_; }

  [[noreturn]] void fail(const field_ref& f, std::string_view what) const {
    throw format_error(file_, f.str(), what);
  }
  [[noreturn]] void fail(std::string field, std::string_view what) const {
    throw format_error(file_, std::move(field), what);
  }

  void need(std::size_t n, const field_ref& f) const {
    if (n > remaining()) {
      fail(f, "needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                  " but the file ends at " + std::to_string(data_.size()) + " (truncated)");
    }
  }

  template <class T>
  T read(const field_ref& f) {
    need(sizeof(T), f);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string(const field_ref& f) {
    const auto len = read<std::uint64_t>(f);
    if (len > remaining()) {
      fail(f, "string length " + std::to_string(len) + " exceeds the " + std::to_string(remaining()) +
                  " bytes left in the file");
    }
    std::string_view s(reinterpret_cast<const char*>(data_.data() + pos_), static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return s;
  }

  // The fewest bytes one value of type t can occupy: bounds array lengths before reserving.
  static std::size_t min_bytes(metadata_type t) {
    switch (t) {
      case metadata_type::u8:
      case metadata_type::i8:
      case metadata_type::boolean:
        return 1;
      case metadata_type::u16:
      case metadata_type::i16:
        return 2;
      case metadata_type::u32:
      case metadata_type::i32:
      case metadata_type::f32:
        return 4;
      case metadata_type::u64:
      case metadata_type::i64:
      case metadata_type::f64:
      case metadata_type::string:
        return 8;
      case metadata_type::array:
        return 12;
    }
    return 1;
  }

  metadata_type read_type(const field_ref& f) {
    const auto id = read<std::uint32_t>(f);
    if (id > static_cast<std::uint32_t>(metadata_type::f64))
      fail(f, "unknown value type " + std::to_string(id));
    return static_cast<metadata_type>(id);
  }

  metadata_value read_value(metadata_type t, const field_ref& f, int depth) {
    switch (t) {
      case metadata_type::u8:
        return read<std::uint8_t>(f);
      case metadata_type::i8:
        return read<std::int8_t>(f);
      case metadata_type::u16:
        return read<std::uint16_t>(f);
      case metadata_type::i16:
        return read<std::int16_t>(f);
      case metadata_type::u32:
        return read<std::uint32_t>(f);
      case metadata_type::i32:
        return read<std::int32_t>(f);
      case metadata_type::u64:
        return read<std::uint64_t>(f);
      case metadata_type::i64:
        return read<std::int64_t>(f);
      case metadata_type::f32:
        return read<float>(f);
      case metadata_type::f64:
        return read<double>(f);
      case metadata_type::boolean: {
        const auto b = read<std::uint8_t>(f);
        if (b > 1) fail(f, "bool holds " + std::to_string(b) + ", not 0 or 1");
        return b == 1;
      }
      case metadata_type::string:
        return std::string(read_string(f));
      case metadata_type::array: {
        if (depth >= max_array_depth) fail(f, "arrays nested deeper than " + std::to_string(max_array_depth));
        metadata_array a;
        a.element_type = read_type(f);
        const auto count = read<std::uint64_t>(f);
        if (count > remaining() / min_bytes(a.element_type)) {
          fail(f, "array of " + std::to_string(count) + " " + std::string(name(a.element_type)) +
                      " cannot fit in the " + std::to_string(remaining()) + " bytes left in the file");
        }
        a.values.reserve(static_cast<std::size_t>(count));
        for (std::uint64_t i = 0; i < count; ++i) {
          const field_ref element{&f, {}, i};
          a.values.push_back(read_value(a.element_type, element, depth + 1));
        }
        return a;
      }
    }
    fail(f, "unknown value type");
  }

 private:
  std::span<const std::byte> data_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

}  // namespace detail

// A GGUF file (versions 2 and 3, little-endian), memory-mapped. Opening validates the whole header
// and every tensor's extent, so views handed out afterwards can be trusted.
class gguf_file : public detail::metadata_lookups<gguf_file> {
 public:
  static constexpr std::uint64_t default_alignment = 32;

  static gguf_file open(const std::filesystem::path& path) {
    gguf_file f;
    f.path_ = path.string();
    f.map_ = detail::mapped_file::open(path);
    f.parse_bytes(f.map_.bytes());
    return f;
  }

  // Parses bytes the caller keeps alive (a file already in memory); name stands for the file in errors.
  static gguf_file parse(std::span<const std::byte> bytes, std::string name) {
    gguf_file f;
    f.path_ = std::move(name);
    f.parse_bytes(bytes);
    return f;
  }

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

  const std::vector<tensor_view>& tensors() const { return tensors_; }              // in file order
  const std::vector<std::string>& metadata_keys() const { return metadata_keys_; }  // in file order
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // where the tensor data section starts

 private:
  gguf_file() = default;

  void parse_bytes(std::span<const std::byte> bytes) {
    detail::gguf_parser p(bytes, path_);
    using detail::field_ref;

    const field_ref magic{nullptr, "magic"};
    p.need(4, magic);
    if (std::memcmp(bytes.data(), "GGUF", 4) != 0)
      p.fail(magic, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
    p.read<std::uint32_t>(magic);

    const field_ref version{nullptr, "version"};
    version_ = p.read<std::uint32_t>(version);
    if (version_ != 2 && version_ != 3) {
      if (version_ == 1) p.fail(version, "version 1 is not supported (only 2 and 3)");
      if (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3) {
        p.fail(version, "big-endian GGUF files are not supported");
      }
      p.fail(version, "unknown version " + std::to_string(version_) + " (only 2 and 3)");
    }

    const field_ref n_tensors_field{nullptr, "n_tensors"};
    const auto n_tensors = p.read<std::uint64_t>(n_tensors_field);
    const field_ref n_kv_field{nullptr, "n_kv"};
    const auto n_kv = p.read<std::uint64_t>(n_kv_field);
    // Smallest key/value: empty key (8) + type (4) + a u8 (1). Smallest tensor info: empty name (8) +
    // n_dims (4) + one dim (8) + type (4) + offset (8).
    if (n_kv > p.remaining() / 13) {
      p.fail(n_kv_field, std::to_string(n_kv) + " key/value pairs cannot fit in a " +
                             std::to_string(bytes.size()) + "-byte file");
    }
    if (n_tensors > p.remaining() / 32) {
      p.fail(n_tensors_field, std::to_string(n_tensors) + " tensor infos cannot fit in a " +
                                  std::to_string(bytes.size()) + "-byte file");
    }

    metadata_keys_.reserve(static_cast<std::size_t>(n_kv));
    for (std::uint64_t i = 0; i < n_kv; ++i) {
      const std::string key_label = "key of metadata entry #" + std::to_string(i);
      std::string key(p.read_string(field_ref{nullptr, key_label}));
      const std::string value_label = "metadata key '" + key + "'";
      const field_ref value_field{nullptr, value_label};
      const metadata_type t = p.read_type(value_field);
      metadata_value v = p.read_value(t, value_field, 0);
      if (!metadata_.emplace(key, std::move(v)).second) p.fail(value_field, "duplicate key");
      metadata_keys_.push_back(std::move(key));
    }

    alignment_ = default_alignment;
    if (const metadata_value* a = find_metadata("general.alignment")) {
      const auto value = as_int(*a);
      if (!value || *value <= 0 || *value > (1 << 30) || (*value & (*value - 1)) != 0) {
        p.fail("metadata key 'general.alignment'", "must be a power of two integer up to 2^30");
      }
      alignment_ = static_cast<std::uint64_t>(*value);
    }

    struct pending {
      std::uint64_t offset;
      std::uint64_t size;
    };
    std::vector<pending> extents;
    tensors_.reserve(static_cast<std::size_t>(n_tensors));
    extents.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      const std::string name_label = "name of tensor #" + std::to_string(i);
      tensor_view t;
      t.name = std::string(p.read_string(field_ref{nullptr, name_label}));
      const std::string label = "tensor '" + t.name + "'";
      const field_ref tf{nullptr, label};

      const auto n_dims = p.read<std::uint32_t>(tf);
      if (n_dims == 0 || n_dims > 4) p.fail(tf, "n_dims is " + std::to_string(n_dims) + ", not 1 to 4");
      std::int64_t ne[4] = {};
      for (std::uint32_t d = 0; d < n_dims; ++d) {
        ne[d] = static_cast<std::int64_t>(p.read<std::uint64_t>(tf));
        if (ne[d] <= 0) p.fail(tf, "dimension ne[" + std::to_string(d) + "] is " + std::to_string(ne[d]));
      }
      const auto type_id = p.read<std::uint32_t>(tf);
      const auto offset = p.read<std::uint64_t>(tf);

      const auto type = dtype_from_ggml(type_id);
      if (!type) {
        p.fail(tf, "type " + std::to_string(type_id) + " (" + std::string(ggml_type_name(type_id)) +
                       ") is not supported");
      }
      t.type = *type;
      std::int64_t numel = 1;
      for (std::uint32_t d = 0; d < n_dims; ++d) {
        const auto product = detail::checked_mul(numel, ne[d]);
        if (!product) p.fail(tf, "element count overflows int64");
        numel = *product;
      }
      if (ne[0] % block_elements(t.type) != 0) {
        p.fail(tf, "row length " + std::to_string(ne[0]) + " is not a multiple of the " +
                       std::string(name(t.type)) + " block size " + std::to_string(block_elements(t.type)));
      }
      const auto size = detail::checked_mul(static_cast<std::uint64_t>(numel / block_elements(t.type)),
                                            static_cast<std::uint64_t>(block_bytes(t.type)));
      if (!size) p.fail(tf, "byte size overflows");
      if (offset % alignment_ != 0) {
        p.fail(tf, "offset " + std::to_string(offset) + " is not a multiple of the alignment " +
                       std::to_string(alignment_));
      }
      for (std::uint32_t d = n_dims; d-- > 0;) t.shape.push_back(ne[d]);
      if (!tensor_index_.emplace(t.name, tensors_.size()).second) p.fail(tf, "duplicate tensor name");
      tensors_.push_back(std::move(t));
      extents.push_back({offset, *size});
    }

    data_offset_ = (p.pos() + alignment_ - 1) / alignment_ * alignment_;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const auto begin = detail::checked_add(data_offset_, extents[i].offset);
      const auto end = begin ? detail::checked_add(*begin, extents[i].size) : std::nullopt;
      if (!end || *end > bytes.size()) {
        p.fail("tensor '" + tensors_[i].name + "'", "data at offset " + std::to_string(extents[i].offset) +
                                                        " (+" + std::to_string(extents[i].size) +
                                                        " bytes) runs past the end of the file at " +
                                                        std::to_string(bytes.size()));
      }
      tensors_[i].bytes =
          bytes.subspan(static_cast<std::size_t>(*begin), static_cast<std::size_t>(extents[i].size));
    }
  }

  detail::mapped_file map_;
  std::string path_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = default_alignment;
  std::uint64_t data_offset_ = 0;
  std::map<std::string, metadata_value, std::less<>> metadata_;
  std::vector<std::string> metadata_keys_;
  std::vector<tensor_view> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

static_assert(weight_source<gguf_file>);

}  // namespace nucleus::io
