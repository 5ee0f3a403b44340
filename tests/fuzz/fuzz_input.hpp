// Reads a fuzzer's bytes as a stream of small decisions; past the end every read gives zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace nucleus_fuzz {

class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }

  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }
  std::uint32_t u32() { return u16() | (static_cast<std::uint32_t>(u16()) << 16); }
  std::uint64_t u64() { return u32() | (static_cast<std::uint64_t>(u32()) << 32); }
  bool flag() { return (byte() & 1) != 0; }

  // Up to n bytes, as they are.
  std::span<const std::uint8_t> take(std::size_t n) {
    if (n > remaining()) n = remaining();
    std::span<const std::uint8_t> s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  std::span<const std::uint8_t> rest() { return take(remaining()); }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Stops the run where a library invariant fails: libFuzzer records the input as a crash.
inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace nucleus_fuzz
