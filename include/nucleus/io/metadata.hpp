// Metadata values (GGUF's kinds; JSON maps onto them) and typed look-ups by key on a source.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nucleus/io/error.hpp"

namespace nucleus::io {

// GGUF's value type ids; JSON values map onto the same set.
enum class metadata_type : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

constexpr std::string_view name(metadata_type t) {
  switch (t) {
    case metadata_type::u8:
      return "u8";
    case metadata_type::i8:
      return "i8";
    case metadata_type::u16:
      return "u16";
    case metadata_type::i16:
      return "i16";
    case metadata_type::u32:
      return "u32";
    case metadata_type::i32:
      return "i32";
    case metadata_type::f32:
      return "f32";
    case metadata_type::boolean:
      return "bool";
    case metadata_type::string:
      return "string";
    case metadata_type::array:
      return "array";
    case metadata_type::u64:
      return "u64";
    case metadata_type::i64:
      return "i64";
    case metadata_type::f64:
      return "f64";
  }
  return "unknown";
}

struct metadata_value;

// Every element has element_type (GGUF arrays are homogeneous; for JSON it is the first element's).
struct metadata_array {
  metadata_type element_type = metadata_type::u8;
  std::vector<metadata_value> values;

  bool operator==(const metadata_array&) const = default;
};

using metadata_variant =
    std::variant<std::uint8_t, std::int8_t, std::uint16_t, std::int16_t, std::uint32_t, std::int32_t,
                 std::uint64_t, std::int64_t, float, double, bool, std::string, metadata_array>;

// A std::variant over every GGUF value kind. A named struct only so that arrays can hold it.
struct metadata_value : metadata_variant {
  using metadata_variant::metadata_variant;
  const metadata_variant& as_variant() const { return *this; }
};

inline bool operator==(const metadata_value& a, const metadata_value& b) {
  return a.as_variant() == b.as_variant();
}

inline metadata_type type_of(const metadata_value& v) {
  constexpr metadata_type by_index[] = {metadata_type::u8,   metadata_type::i8,      metadata_type::u16,
                                        metadata_type::i16,  metadata_type::u32,     metadata_type::i32,
                                        metadata_type::u64,  metadata_type::i64,     metadata_type::f32,
                                        metadata_type::f64,  metadata_type::boolean, metadata_type::string,
                                        metadata_type::array};
  return by_index[v.index()];
}

// Value-level views: nullopt / nullptr when the value holds another kind.
inline std::optional<std::int64_t> as_int(const metadata_value& v) {
  return std::visit(
      [](const auto& x) -> std::optional<std::int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::same_as<T, std::uint64_t>) {
          if (x > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
          return static_cast<std::int64_t>(x);
        } else if constexpr (std::integral<T> && !std::same_as<T, bool>) {
          return static_cast<std::int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v.as_variant());
}

// Floats, and integers too (JSON configs write 10000 for a float field).
inline std::optional<double> as_float(const metadata_value& v) {
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::floating_point<T> || (std::integral<T> && !std::same_as<T, bool>)) {
          return static_cast<double>(x);
        } else {
          return std::nullopt;
        }
      },
      v.as_variant());
}

inline std::optional<bool> as_bool(const metadata_value& v) {
  if (const bool* b = std::get_if<bool>(&v.as_variant())) return *b;
  return std::nullopt;
}

inline const std::string* as_string(const metadata_value& v) {
  return std::get_if<std::string>(&v.as_variant());
}

inline const metadata_array* as_array(const metadata_value& v) {
  return std::get_if<metadata_array>(&v.as_variant());
}

// Anything that answers metadata look-ups and can name itself in errors.
template <class S>
concept metadata_source = requires(const S& s, std::string_view key) {
  { s.find_metadata(key) } -> std::same_as<const metadata_value*>;
  { s.path() } -> std::convertible_to<std::string_view>;
};

namespace detail {

template <class S>
[[noreturn]] void wrong_metadata_type(const S& s, std::string_view key, const metadata_value& v,
                                      std::string_view expected) {
  std::string what = "expected " + std::string(expected) + ", found " + std::string(name(type_of(v)));
  if (const metadata_array* a = as_array(v)) what += " of " + std::string(name(a->element_type));
  throw format_error(std::string(std::string_view(s.path())), "metadata key '" + std::string(key) + "'",
                     what);
}

template <class T, class S, class View>
std::optional<std::vector<T>> get_array(const S& s, std::string_view key, View view,
                                        std::string_view expected) {
  const metadata_value* v = s.find_metadata(key);
  if (v == nullptr) return std::nullopt;
  const metadata_array* a = as_array(*v);
  if (a == nullptr) wrong_metadata_type(s, key, *v, expected);
  std::vector<T> out;
  out.reserve(a->values.size());
  for (const metadata_value& e : a->values) {
    auto x = view(e);
    if (!x) wrong_metadata_type(s, key, *v, expected);
    out.push_back(static_cast<T>(*x));
  }
  return out;
}

}  // namespace detail

// Source-level look-ups: nullopt when the key is absent; format_error naming the file and the key
// when it holds another kind (or an integer that does not fit in int64).
template <metadata_source S>
std::optional<std::int64_t> get_int(const S& s, std::string_view key) {
  const metadata_value* v = s.find_metadata(key);
  if (v == nullptr) return std::nullopt;
  if (auto x = as_int(*v)) return x;
  detail::wrong_metadata_type(s, key, *v, "an integer that fits in int64");
}

template <metadata_source S>
std::optional<double> get_float(const S& s, std::string_view key) {
  const metadata_value* v = s.find_metadata(key);
  if (v == nullptr) return std::nullopt;
  if (auto x = as_float(*v)) return x;
  detail::wrong_metadata_type(s, key, *v, "a number");
}

template <metadata_source S>
std::optional<bool> get_bool(const S& s, std::string_view key) {
  const metadata_value* v = s.find_metadata(key);
  if (v == nullptr) return std::nullopt;
  if (auto x = as_bool(*v)) return x;
  detail::wrong_metadata_type(s, key, *v, "a bool");
}

template <metadata_source S>
std::optional<std::string> get_string(const S& s, std::string_view key) {
  const metadata_value* v = s.find_metadata(key);
  if (v == nullptr) return std::nullopt;
  if (const std::string* x = as_string(*v)) return *x;
  detail::wrong_metadata_type(s, key, *v, "a string");
}

template <metadata_source S>
std::optional<std::vector<std::string>> get_string_array(const S& s, std::string_view key) {
  return detail::get_array<std::string>(
      s, key,
      [](const metadata_value& e) {
        const std::string* x = as_string(e);
        return x ? std::optional<std::string>(*x) : std::nullopt;
      },
      "an array of strings");
}

template <metadata_source S>
std::optional<std::vector<std::int64_t>> get_int_array(const S& s, std::string_view key) {
  return detail::get_array<std::int64_t>(
      s, key, [](const metadata_value& e) { return as_int(e); }, "an array of integers");
}

// Narrowed to float: GGUF stores such arrays (token scores) as f32.
template <metadata_source S>
std::optional<std::vector<float>> get_float_array(const S& s, std::string_view key) {
  return detail::get_array<float>(
      s, key, [](const metadata_value& e) { return as_float(e); }, "an array of numbers");
}

// The same, for keys a model cannot do without: a missing key is a format_error too.
template <class T, metadata_source S>
T require(const S& s, std::string_view key, std::optional<T> found) {
  if (!found)
    throw format_error(std::string(std::string_view(s.path())), "metadata key '" + std::string(key) + "'",
                       "missing");
  return *std::move(found);
}
template <metadata_source S>
std::int64_t require_int(const S& s, std::string_view key) {
  return require<std::int64_t>(s, key, get_int(s, key));
}
template <metadata_source S>
double require_float(const S& s, std::string_view key) {
  return require<double>(s, key, get_float(s, key));
}
template <metadata_source S>
std::string require_string(const S& s, std::string_view key) {
  return require<std::string>(s, key, get_string(s, key));
}

namespace detail {

// Gives a source the look-ups as members: file.get_int("llama.block_count").
template <class Derived>
class metadata_lookups {
 public:
  std::optional<std::int64_t> get_int(std::string_view key) const { return io::get_int(self(), key); }
  std::optional<double> get_float(std::string_view key) const { return io::get_float(self(), key); }
  std::optional<bool> get_bool(std::string_view key) const { return io::get_bool(self(), key); }
  std::optional<std::string> get_string(std::string_view key) const { return io::get_string(self(), key); }
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const {
    return io::get_string_array(self(), key);
  }
  std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const {
    return io::get_int_array(self(), key);
  }
  std::optional<std::vector<float>> get_float_array(std::string_view key) const {
    return io::get_float_array(self(), key);
  }
  std::int64_t require_int(std::string_view key) const { return io::require_int(self(), key); }
  double require_float(std::string_view key) const { return io::require_float(self(), key); }
  std::string require_string(std::string_view key) const { return io::require_string(self(), key); }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace detail

}  // namespace nucleus::io
