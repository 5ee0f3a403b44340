// Executors for the batch sampler: run tasks 0..n-1, each told which worker slot runs it.
//
// An executor is any type with `std::size_t concurrency() const` (worker slots, >= 1) and
// `void bulk(std::size_t n, F&& f)` that calls f(task, slot) once for every task with
// slot < concurrency(), never two tasks at once on one slot, and returns when all are done.
#pragma once

#include <atomic>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace nucleus {

namespace detail {
// One step of a spin-wait: the CPU's pause (x86) or yield (Arm) hint, so a spinning thread gives its
// core's other hardware thread room and saves power.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield");
#endif
}
}  // namespace detail

template <class E>
concept executor = requires(E& e, const E& ce, void (*f)(std::size_t, std::size_t)) {
  { ce.concurrency() } -> std::convertible_to<std::size_t>;
  e.bulk(std::size_t{1}, f);
};

// Runs every task on the calling thread.
struct inline_executor {
  std::size_t concurrency() const noexcept { return 1; }
  template <class F>
  void bulk(std::size_t n, F&& f) const {
    for (std::size_t i = 0; i < n; ++i) f(i, std::size_t{0});
  }
};

// A small fixed pool: `threads - 1` workers plus the calling thread, which takes part in every bulk
// call. Tasks are claimed one at a time from a shared counter. bulk() allocates nothing.
class thread_pool {
 public:
  explicit thread_pool(std::size_t threads) {
    if (threads == 0) throw std::invalid_argument("nucleus::thread_pool: threads must be >= 1");
    workers_.reserve(threads - 1);
    try {
      for (std::size_t w = 1; w < threads; ++w) workers_.emplace_back([this, w] { work(w); });
    } catch (...) {
      shut_down();  // the threads already started must be joined before they are destroyed
      throw;
    }
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { shut_down(); }

  std::size_t concurrency() const noexcept { return workers_.size() + 1; }

  // One bulk call at a time per pool. If a task throws, the remaining tasks still run, and the
  // first exception is rethrown here once every worker is done.
  template <class F>
  void bulk(std::size_t n, F&& f) {
    if (n == 0) return;
    if (workers_.empty() || n == 1) {
      for (std::size_t i = 0; i < n; ++i) f(i, std::size_t{0});
      return;
    }
    using fn = std::remove_reference_t<F>;
    {
      std::lock_guard lock(mutex_);
      job_ = {const_cast<void*>(static_cast<const void*>(std::addressof(f))),
              [](void* ctx, std::size_t task, std::size_t slot) { (*static_cast<fn*>(ctx))(task, slot); }, n};
      next_.store(0, std::memory_order_relaxed);
      busy_.store(workers_.size(), std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);  // publishes the job to spinning workers
    }
    start_.notify_all();
    drain(0);
    if (!spin_until([this] { return busy_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
    }
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct job {
    void* ctx = nullptr;
    void (*call)(void*, std::size_t, std::size_t) = nullptr;
    std::size_t tasks = 0;
  };

  void drain(std::size_t slot) noexcept {
    for (std::size_t t; (t = next_.fetch_add(1, std::memory_order_relaxed)) < job_.tasks;) {
      try {
        job_.call(job_.ctx, t, slot);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void shut_down() noexcept {
    {
      std::lock_guard lock(mutex_);
      stop_.store(true, std::memory_order_release);
    }
    start_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Waiting threads spin this many pause instructions (tens of microseconds) before they block:
  // back-to-back batches then skip the sleep and wake-up of a condition variable.
  static constexpr int spin_limit = 2000;

  template <class Ready>
  static bool spin_until(Ready&& ready) noexcept {
    for (int i = 0; i < spin_limit; ++i) {
      if (ready()) return true;
      detail::cpu_relax();
    }
    return ready();
  }

  void work(std::size_t slot) {
    std::uint64_t seen = 0;
    for (;;) {
      auto fresh = [&] {
        return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      };
      if (!spin_until(fresh)) {
        std::unique_lock lock(mutex_);
        start_.wait(lock, fresh);
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      drain(slot);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mutex_);  // a waiter checks busy_ under the lock: no lost wake-up
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  job job_;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> busy_{0};
  std::exception_ptr error_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

static_assert(executor<inline_executor> && executor<thread_pool>);

}  // namespace nucleus
