#pragma once

// Helpers shared by the io tests: scratch files and a byte-level GGUF writer that can write
// anything, including the lies hostile files tell.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

namespace nucleus_io_test {

inline std::filesystem::path scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("nucleus_io_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_file(const std::string& name, std::span<const std::byte> bytes) {
  const auto path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read test fixture " + path.string());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

template <class T>
std::vector<T> read_array(const std::filesystem::path& path) {
  const auto bytes = read_file(path);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// GGUF, written field by field. mark() remembers where the next field starts so a test can patch it.
class gguf_builder {
 public:
  std::vector<std::byte> bytes;

  template <class T>
  gguf_builder& put(T v) {
    const auto at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
    return *this;
  }
  gguf_builder& str(std::string_view s) {
    put<std::uint64_t>(s.size());
    for (char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  gguf_builder& header(std::uint32_t version, std::uint64_t n_tensors, std::uint64_t n_kv) {
    for (char c : std::string_view("GGUF")) bytes.push_back(static_cast<std::byte>(c));
    return put(version).put(n_tensors).put(n_kv);
  }
  gguf_builder& kv_u32(std::string_view key, std::uint32_t v) {
    return str(key).put<std::uint32_t>(4).put(v);
  }
  gguf_builder& kv_string(std::string_view key, std::string_view v) {
    return str(key).put<std::uint32_t>(8).str(v);
  }
  gguf_builder& tensor_info(std::string_view name, std::vector<std::uint64_t> ne, std::uint32_t type,
                            std::uint64_t offset) {
    str(name).put<std::uint32_t>(static_cast<std::uint32_t>(ne.size()));
    for (auto d : ne) put(d);
    return put(type).put(offset);
  }
  gguf_builder& pad(std::size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  gguf_builder& raw(std::span<const std::byte> data) {
    bytes.insert(bytes.end(), data.begin(), data.end());
    return *this;
  }
  std::size_t mark() const { return bytes.size(); }

  template <class T>
  void patch(std::size_t at, T v) {
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
};

}  // namespace nucleus_io_test
