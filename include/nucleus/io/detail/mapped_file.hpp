// A read-only, move-only memory mapping of a whole weight file.
#pragma once

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nucleus::io::detail {

// A read-only private mapping of a whole file; move-only. Tensor views point into it, and stay
// valid when the owner moves because the mapping itself does not.
class mapped_file {
 public:
  mapped_file() = default;

  static mapped_file open(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      fail(path, "cannot stat", err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, "not a regular file", EINVAL);
    }
    mapped_file m;
    m.size_ = static_cast<std::size_t>(st.st_size);
    if (m.size_ > 0) {
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail(path, "cannot map", err);
      }
      m.data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
    return m;
  }

  mapped_file(mapped_file&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  mapped_file& operator=(mapped_file&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() { unmap(); }

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  [[noreturn]] static void fail(const std::filesystem::path& path, const char* what, int err = errno) {
    throw std::system_error(err, std::generic_category(), path.string() + ": " + what);
  }
  void unmap() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
  }

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace nucleus::io::detail
