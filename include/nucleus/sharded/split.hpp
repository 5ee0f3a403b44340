// One row split across shards inside one process: the shards of nucleus/sharded/sampler.hpp run as
// tasks of an executor (a thread pool: one long row on several cores), and each round's messages
// pass through memory. Bit-identical to sampler::sample on the whole row for any cut.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "nucleus/engine/thread_pool.hpp"
#include "nucleus/sharded/sampler.hpp"

namespace nucleus {

class split_sampler {
 public:
  // Up to `shards` shards per row; budget as shard_sampler's.
  split_sampler(const sampler& s, std::size_t shards, std::size_t budget = 1024) {
    if (shards == 0) throw std::invalid_argument("nucleus::split_sampler: shards must be >= 1");
    shards_.reserve(shards);
    for (std::size_t i = 0; i < shards; ++i) shards_.emplace_back(budget);
    spaces_.resize(shards);
    inbox_.resize(shards);
    requests_.resize(shards);
    mu_.resize(shards);
    sampler_ = &s;
  }

  std::size_t shards() const noexcept { return shards_.size(); }
  shard_sampler::path route() const noexcept { return shards_[0].route(); }

  // The row cut at `cuts` (shard i holds [cuts[i], cuts[i + 1]); cuts[0] = 0, cuts.back() = V,
  // non-decreasing, at most shards() + 1 entries). ex runs the shards' work of each round.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>> row_result sample(std::span<const T> row,
                                                              std::span<const std::size_t> cuts,
                                                              const row_request& rq,
                                                              std::span<token_logprob> top = {},
                                                              E&& ex = E{}) {
    const std::size_t p = cuts.size() - 1;
    if (cuts.size() < 2 || p > shards_.size() || cuts.front() != 0 || cuts.back() != row.size())
      throw std::invalid_argument("nucleus::split_sampler: cuts must run from 0 to the row's length");
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
    ex.bulk(p, [&](std::size_t i, std::size_t) {
      shards_[i].begin(*sampler_, row.subspan(cuts[i], cuts[i + 1] - cuts[i]), cuts[i], row.size(),
                       requests_[i], spaces_[i], i);
    });
    rounds_ = 0;
    bytes_ = 0;
    while (!shards_[0].done()) {
      for (std::size_t i = 0; i < p; ++i) inbox_[i] = shards_[i].outgoing();  // keeps capacity: no allocation
      const std::span<const shard_message> all(inbox_.data(), p);
      ex.bulk(p, [&](std::size_t i, std::size_t) { shards_[i].step(all); });
    }
    for (std::size_t i = 0; i < p; ++i) bytes_ = std::max(bytes_, shards_[i].bytes_sent());
    rounds_ = shards_[0].rounds();
    if (rq.mirostat_mu) *rq.mirostat_mu = mu_[0];
    return shards_[0].result(top);
  }

  // The row cut into `parts` shards of nearly equal length.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>> row_result sample(std::span<const T> row, const row_request& rq,
                                                              std::span<token_logprob> top = {},
                                                              E&& ex = E{}) {
    const std::size_t p = std::min(shards_.size(), std::max<std::size_t>(ex.concurrency(), 1));
    even_.resize(p + 1);
    for (std::size_t i = 0; i <= p; ++i) even_[i] = row.size() * i / p;
    return sample(row, std::span<const std::size_t>(even_), rq, top, std::forward<E>(ex));
  }

  // The last row's rounds, and the most bytes one shard sent in them.
  std::size_t rounds() const noexcept { return rounds_; }
  std::size_t bytes_per_shard() const noexcept { return bytes_; }

 private:
  const sampler* sampler_ = nullptr;
  std::vector<shard_sampler> shards_;
  std::vector<workspace> spaces_;
  std::vector<shard_message> inbox_;
  std::vector<row_request> requests_;
  std::vector<float> mu_;
  std::vector<std::size_t> even_;
  std::size_t rounds_ = 0, bytes_ = 0;
};

}  // namespace nucleus
