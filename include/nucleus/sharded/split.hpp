// One row split across shards inside one process: the shards of nucleus/sharded/sampler.hpp run as
// tasks of an executor (a thread pool: one long row on several cores), and each round's messages
// pass through memory. Bit-identical to sampler::sample on the whole row for any cut.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "nucleus/engine/thread_pool.hpp"
#include "nucleus/sharded/sampler.hpp"

namespace nucleus {

namespace detail {

// All shards of a row wait here between rounds. Every participant runs on its own thread (the
// split sampler uses it only when the executor has a slot per shard): a waiter spins briefly, since
// a round's partners arrive within microseconds on free cores, then blocks on the phase (a futex
// through std::atomic::wait), so a machine with fewer free cores than shards is not burnt spinning.
class spin_barrier {
 public:
  spin_barrier() = default;
  // Movable while idle (a split_sampler may live in a vector): the state is per use (reset()).
  spin_barrier(spin_barrier&&) noexcept {}
  spin_barrier& operator=(spin_barrier&&) noexcept { return *this; }

  void reset(std::size_t parties) noexcept {
    parties_ = parties;
    arrived_.store(0, std::memory_order_relaxed);
    aborted_.store(false, std::memory_order_relaxed);
  }
  // Pauses before a waiter blocks: a round's partners on free cores arrive within this.
  static constexpr int spin_limit = 4000;

  // Returns false when a party gave up (abort()): the round will not complete.
  bool wait() noexcept {
    const std::uint64_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);
      advance();
      return !aborted_.load(std::memory_order_acquire);
    }
    for (int i = 0; phase_.load(std::memory_order_acquire) == phase; ++i) {
      if (aborted_.load(std::memory_order_acquire)) return false;
      if (i < spin_limit) {
        detail::cpu_relax();
      } else {
        phase_.wait(phase, std::memory_order_acquire);  // until advance() or abort() moves it
      }
    }
    return !aborted_.load(std::memory_order_acquire);
  }
  // A party that failed: every waiter returns false from now on, so none is left waiting.
  void abort() noexcept {
    aborted_.store(true, std::memory_order_release);
    advance();  // wakes the blocked ones, which then read aborted_
  }

 private:
  void advance() noexcept {
    phase_.fetch_add(1, std::memory_order_acq_rel);
    phase_.notify_all();
  }

  std::size_t parties_ = 1;
  std::atomic<std::size_t> arrived_{0};
  std::atomic<std::uint64_t> phase_{0};
  std::atomic<bool> aborted_{false};
};

}  // namespace detail

class split_sampler {
 public:
  // Up to `shards` shards per row; budget as shard_sampler's.
  split_sampler(const sampler& s, std::size_t shards, std::size_t budget = shard_sampler::default_budget)
      : sampler_(&s) {
    if (shards == 0) throw std::invalid_argument("nucleus::split_sampler: shards must be >= 1");
    shards_.reserve(shards);
    for (std::size_t i = 0; i < shards; ++i) shards_.emplace_back(budget);
    spaces_.resize(shards);
    requests_.resize(shards);
    mu_.resize(shards);
    refs_.reserve(shards);
  }

  std::size_t shards() const noexcept { return shards_.size(); }
  // The path the last row took (shard_sampler::path).
  shard_sampler::path route() const noexcept { return shards_[0].route(); }

  // The row cut at `cuts` (shard i holds [cuts[i], cuts[i + 1]); cuts[0] = 0, cuts.back() = V,
  // non-decreasing, at most shards() + 1 entries). ex runs the shards: on a thread_pool with a slot
  // per shard, each shard runs every round on its own thread (one bulk call per row, a spin barrier
  // between rounds); otherwise each round is one bulk call.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>> row_result sample(std::span<const T> row,
                                                              std::span<const std::size_t> cuts,
                                                              const row_request& rq,
                                                              std::span<token_logprob> top = {},
                                                              E&& ex = E{}) {
    if (cuts.size() < 2 || cuts.size() - 1 > shards_.size() || cuts.front() != 0 || cuts.back() != row.size())
      throw std::invalid_argument("nucleus::split_sampler: cuts must run from 0 to the row's length");
    const std::size_t p = cuts.size() - 1;
    for (std::size_t i = 0; i < p; ++i)
      if (cuts[i] > cuts[i + 1])
        throw std::invalid_argument("nucleus::split_sampler: cuts must not decrease");
    // Mirostat's mu is the request's state, updated by the draw: each shard draws on its own copy
    // (as ranks of a job each hold theirs), and shard 0's becomes the request's.
    for (std::size_t i = 0; i < p; ++i) {
      requests_[i] = rq;
      if (rq.mirostat_mu) {
        mu_[i] = *rq.mirostat_mu;
        requests_[i].mirostat_mu = &mu_[i];
      }
    }
    refs_.clear();
    for (std::size_t i = 0; i < p; ++i) refs_.push_back(std::cref(shards_[i].outgoing()));
    auto begin = [&](std::size_t i) {
      shards_[i].begin(*sampler_, row.subspan(cuts[i], cuts[i + 1] - cuts[i]), cuts[i], row.size(),
                       requests_[i], spaces_[i], i);
    };
    // The barrier needs every shard on a thread of its own at once: nucleus::thread_pool gives that
    // when it has a slot per shard (an executor in general may run tasks one after another).
    if (std::is_same_v<std::remove_cvref_t<E>, thread_pool> && p > 1 && ex.concurrency() >= p) {
      barrier_.reset(p);
      // A shard that throws releases the others (abort) and its exception leaves through bulk().
      ex.bulk(p, [&](std::size_t i, std::size_t) {
        try {
          begin(i);
          for (;;) {
            if (!barrier_.wait()) return;  // every shard's message of this round is written
            if (i == 0) refresh(p);
            if (!barrier_.wait()) return;   // ... and listed
            if (shards_[i].done()) return;  // (every shard of a row finishes in the same round)
            shards_[i].step(refs_);
          }
        } catch (...) {
          barrier_.abort();
          throw;
        }
      });
    } else {
      ex.bulk(p, [&](std::size_t i, std::size_t) { begin(i); });
      for (refresh(p); !shards_[0].done(); refresh(p))
        ex.bulk(p, [&](std::size_t i, std::size_t) { shards_[i].step(refs_); });
    }
    bytes_ = 0;
    for (std::size_t i = 0; i < p; ++i) bytes_ = std::max(bytes_, shards_[i].bytes_sent());
    rounds_ = shards_[0].rounds();
    if (rq.mirostat_mu) *rq.mirostat_mu = mu_[0];
    return shards_[0].result(top);
  }

  // The row cut into min(shards(), ex.concurrency()) shards of nearly equal length, where
  // splitting pays: the draw over the whole row (dense, without min-p) and top-p. Greedy, top-k,
  // min-p and the gathered knobs cost the whole row only a pass or two, less than the rounds'
  // synchronization (bench/sharded_bench.cpp), so those rows stay whole. The result is the same.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>> row_result sample(std::span<const T> row, const row_request& rq,
                                                              std::span<token_logprob> top = {},
                                                              E&& ex = E{}) {
    const shard_sampler::path route = shard_sampler::route_of(*sampler_);
    const bool pays = (route == shard_sampler::path::dense && sampler_->params().min_p <= 0.0f) ||
                      route == shard_sampler::path::top_p;
    const std::size_t p = pays ? std::min(shards_.size(), std::max<std::size_t>(ex.concurrency(), 1)) : 1;
    even_.resize(p + 1);
    for (std::size_t i = 0; i <= p; ++i) even_[i] = row.size() * i / p;
    return sample(row, std::span<const std::size_t>(even_), rq, top, std::forward<E>(ex));
  }

  // The last row's rounds, and the most bytes one shard sent in them.
  std::size_t rounds() const noexcept { return rounds_; }
  std::size_t bytes_per_shard() const noexcept { return bytes_; }

 private:
  // Lists each shard's current message (each shard writes the next one into its other buffer).
  void refresh(std::size_t p) {
    for (std::size_t i = 0; i < p; ++i) refs_[i] = std::cref(shards_[i].outgoing());
  }

  const sampler* sampler_;
  std::vector<shard_sampler> shards_;
  std::vector<workspace> spaces_;
  std::vector<row_request> requests_;
  std::vector<float> mu_;
  std::vector<std::reference_wrapper<const shard_message>> refs_;
  std::vector<std::size_t> even_;
  detail::spin_barrier barrier_;
  std::size_t rounds_ = 0, bytes_ = 0;
};

}  // namespace nucleus
