#include <nucleus/io/progress.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <unistd.h>

using nucleus::io::progress_bar;

namespace {

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace

TEST_CASE("progress_bar: silent when the stream is not a terminal", "[io][progress]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    progress_bar bar("loading", 10, fds[1]);
    CHECK_FALSE(bar.active());
    for (int i = 0; i < 10; ++i) bar.advance();
  }
  ::close(fds[1]);
  CHECK(drain(fds[0]).empty());
  ::close(fds[0]);
}

TEST_CASE("progress_bar: draws on a terminal, once per percent, and ends the line", "[io][progress]") {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) {
    WARN("no pseudo-terminal available; the terminal case is not exercised");
    return;
  }
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  REQUIRE(slave >= 0);
  {
    progress_bar bar("loading", 1000, slave);
    CHECK(bar.active());
    for (int i = 0; i < 1000; ++i) bar.advance();
    bar.finish();
    bar.advance();  // ignored after finish
  }
  ::close(slave);
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  const std::string out = drain(master);
  ::close(master);
  std::size_t redraws = 0;
  for (auto at = out.find("\rloading ["); at != std::string::npos; at = out.find("\rloading [", at + 1))
    ++redraws;
  CHECK(redraws == 101);  // 0% .. 100%, each once
  CHECK(out.find("loading [") != std::string::npos);
  CHECK(out.find("100%") != std::string::npos);
  CHECK(out.find("##############################") != std::string::npos);
  CHECK(out.back() == '\n');
}
