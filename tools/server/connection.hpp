// The server's connections, read and watched by us instead of by cpp-httplib. Debian's cpp-httplib
// 0.11 times out each recv alone (a client sending a byte every few seconds holds a thread forever)
// and cannot tell a handler that its client left. guarded_server keeps httplib's request parsing
// and routing (Server::process_request) and replaces only the loop around it: a whole request must
// arrive within a deadline, and a handler can ask whether its client is still there.
// Include after <httplib.h> (main.cpp includes that last: its <resolv.h> breaks Eigen).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace nucleus::server {

namespace detail {

// The socket of the request this thread is handling, or -1: httplib runs a handler (and a streamed
// response's provider) on the thread that read its request.
inline thread_local int current_client = -1;

inline void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  const int got = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n)
                       : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  if (got != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// Waits up to `ms` for `events` on fd; retries when a signal interrupts.
inline short wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int n;
  do n = ::poll(&p, 1, ms);
  while (n < 0 && errno == EINTR);
  return n > 0 ? p.revents : 0;
}

}  // namespace detail

// True when the client of the request this thread handles has closed its end (or its socket
// failed). Cheap (a poll, perhaps a peek): handlers ask between decode steps.
inline bool client_left() {
  const int fd = detail::current_client;
  if (fd < 0) return false;
  const short ev = detail::wait_for(fd, POLLIN | POLLRDHUP, 0);
  if (ev & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) return true;
  if (!(ev & POLLIN)) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// One connection's byte stream for httplib's parser. Reads wait at most the per-read timeout and
// never past the request's deadline; once a read times out the stream is spent: its writes fail
// and the connection closes (httplib would otherwise answer 400 and read the trickle as the next
// request).
class deadline_stream final : public httplib::Stream {
 public:
  using clock = std::chrono::steady_clock;

  deadline_stream(int fd, clock::duration read_timeout, clock::duration write_timeout)
      : fd_(fd), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  // A new request begins: all of it (request line, headers, body) must arrive within `limit`.
  void start_request(clock::duration limit) { deadline_ = clock::now() + limit; }
  bool spent() const { return spent_; }
  bool has_buffered() const { return at_ < end_; }

  bool is_readable() const override { return has_buffered() || wait_readable(); }
  bool is_writable() const override {
    return !spent_ && (detail::wait_for(fd_, POLLOUT, millis(write_timeout_)) & POLLOUT);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!has_buffered()) {
      if (spent_ || !wait_readable()) {
        spent_ = true;
        return -1;
      }
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      at_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t k = std::min(size, end_ - at_);
    std::memcpy(ptr, buf_ + at_, k);
    at_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    detail::address_of(fd_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    detail::address_of(fd_, false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  static int millis(clock::duration d) {
    return static_cast<int>(
        std::clamp<long long>(std::chrono::ceil<std::chrono::milliseconds>(d).count(), 0, 1 << 30));
  }
  bool wait_readable() const {
    const auto now = clock::now();
    if (now >= deadline_) return false;
    const clock::duration wait = std::min<clock::duration>(read_timeout_, deadline_ - now);
    return detail::wait_for(fd_, POLLIN, millis(wait)) & (POLLIN | POLLHUP | POLLERR);
  }

  int fd_;
  clock::duration read_timeout_, write_timeout_;
  clock::time_point deadline_ = clock::time_point::max();
  bool spent_ = false;
  char buf_[4096];
  std::size_t at_ = 0, end_ = 0;
};

// httplib::Server with our own loop over each connection's requests (httplib's keep-alive loop,
// with the request deadline and the handler's view of its client added).
class guarded_server : public httplib::Server {
 public:
  // The most time one request (line, headers and body) may take to arrive, from its first byte.
  std::chrono::milliseconds request_limit{30000};

 private:
  bool process_and_close_socket(socket_t sock) override {
    using std::chrono::seconds, std::chrono::microseconds;
    deadline_stream strm(sock, seconds(read_timeout_sec_) + microseconds(read_timeout_usec_),
                         seconds(write_timeout_sec_) + microseconds(write_timeout_usec_));
    detail::current_client = sock;
    bool ok = false;
    for (std::size_t left = keep_alive_max_count_;
         left > 0 && next_request(strm, sock, left == keep_alive_max_count_); --left) {
      strm.start_request(request_limit);
      bool closed = false;
      ok = process_request(strm, left == 1, closed, nullptr);
      if (!ok || closed || strm.spent()) break;
    }
    detail::current_client = -1;
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  // Waits for a request's first byte; false when none comes, the client closed, or the server is
  // stopping (looked at every 50 ms, as httplib does every 10). Between requests the wait is the
  // keep-alive timeout. A new connection's first request gets the read timeout if that is longer:
  // a client that connects and then waits for the CPU before it writes (32 concurrent clients on a
  // loaded machine did) must not find its connection closed by the idle rule, and its request
  // answered by a reset.
  bool next_request(const deadline_stream& strm, int sock, bool first) const {
    if (strm.has_buffered()) return true;  // a pipelined request
    const auto wait = first ? std::max(keep_alive_timeout_sec_, read_timeout_sec_ + (read_timeout_usec_ > 0))
                            : keep_alive_timeout_sec_;
    const auto until = deadline_stream::clock::now() + std::chrono::seconds(wait);
    while (svr_sock_ != INVALID_SOCKET) {
      if (detail::wait_for(sock, POLLIN, 50)) return true;  // data, or the end the parser will read
      if (deadline_stream::clock::now() >= until) return false;
    }
    return false;
  }
};

}  // namespace nucleus::server
