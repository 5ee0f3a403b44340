// A one-line progress bar for loading weights, drawn only on a terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <unistd.h>

namespace nucleus::io {

// A one-line progress bar for loading. It draws only when fd (stderr by default) is a terminal, so
// logs, pipes and tests stay clean; it redraws only when the drawn text changes.
class progress_bar {
 public:
  static constexpr int width = 30;

  progress_bar(std::string label, std::uint64_t total, int fd = 2)
      : label_(std::move(label)), total_(total), fd_(fd), active_(::isatty(fd) == 1) {}
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;
  ~progress_bar() { finish(); }

  bool active() const { return active_; }

  void advance(std::uint64_t n = 1) { set(done_ + n); }

  void set(std::uint64_t done) {
    done_ = done < total_ ? done : total_;
    if (!active_ || finished_) return;
    const int percent = total_ == 0 ? 100 : static_cast<int>(done_ * 100 / total_);
    if (percent == drawn_percent_) return;
    drawn_percent_ = percent;
    draw(percent);
  }

  // Completes the line; later updates are ignored.
  void finish() {
    if (finished_) return;
    if (active_) {
      if (drawn_percent_ != 100) draw(100);
      write_all("\n");
    }
    finished_ = true;
  }

 private:
  void draw(int percent) {
    const int filled = percent * width / 100;
    std::string line = "\r" + label_ + " [";
    line.append(static_cast<std::size_t>(filled), '#');
    line.append(static_cast<std::size_t>(width - filled), '.');
    char tail[32];
    std::snprintf(tail, sizeof tail, "] %3d%%", percent);
    line += tail;
    write_all(line);
  }

  void write_all(const std::string& s) const {
    std::size_t off = 0;
    while (off < s.size()) {
      const auto n = ::write(fd_, s.data() + off, s.size() - off);
      if (n <= 0) return;  // a broken terminal must not break loading
      off += static_cast<std::size_t>(n);
    }
  }

  std::string label_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  int fd_;
  bool active_;
  bool finished_ = false;
  int drawn_percent_ = -1;
};

}  // namespace nucleus::io
