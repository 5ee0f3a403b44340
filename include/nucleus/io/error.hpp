// format_error, thrown for a weight file that cannot be trusted; it names the file and the field.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace nucleus::io {

// A weight file that cannot be trusted. The message always names the file and the field, key or tensor
// at fault, so a user can tell which of several files broke and where.
class format_error : public std::runtime_error {
 public:
  format_error(std::string file, std::string field, std::string_view what)
      : std::runtime_error(file + ": " + field + ": " + std::string(what)),
        file_(std::move(file)),
        field_(std::move(field)) {}

  const std::string& file() const noexcept { return file_; }
  const std::string& field() const noexcept { return field_; }

 private:
  std::string file_;
  std::string field_;
};

}  // namespace nucleus::io
