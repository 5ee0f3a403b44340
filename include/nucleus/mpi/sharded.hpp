// Sharded sampling over MPI (nucleus::mpi, CMake target nucleus::mpi): every rank holds shards of the
// rows' vocabulary, and the rounds of nucleus/sharded/sampler.hpp run as MPI all-gathers of the
// shards' packed messages, one exchange per round for a whole batch of rows. Each rank ends with the
// result the engine sampler gives on the whole row, bit for bit. docs/distributed.md.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/sharded/sampler.hpp"

namespace nucleus::mpi {

// One shard of one row, held by this rank. A row's shards are numbered 0 .. shards - 1 in
// vocabulary order; shard i covers [v0, v0 + slice.size()). Ranks hold contiguous runs of a row's
// shards in rank order (rank r's shards precede rank r + 1's), and every shard appears exactly once.
template <logit_type T>
struct shard_part {
  const nucleus::sampler* sampler = nullptr;
  std::size_t row = 0;     // the row's index in the batch (out[row] receives its result)
  std::size_t shard = 0;   // this shard's place among the row's shards
  std::size_t shards = 1;  // the row's shards in all, over every rank
  std::span<const T> slice;
  std::size_t v0 = 0;
  std::size_t vocab = 0;  // the whole row's length
  row_request request;
};

struct batch_stats {
  std::size_t rounds = 0;      // exchanges (the last one, in which every rank reports done, included)
  std::size_t bytes_sent = 0;  // bytes this rank contributed, over all rounds and rows
};

class sharded_batch {
 public:
  explicit sharded_batch(MPI_Comm comm, std::size_t budget = shard_sampler::default_budget)
      : comm_(comm), budget_(budget) {
    MPI_Comm_size(comm_, &ranks_);
    sizes_.resize(static_cast<std::size_t>(ranks_));
    displs_.resize(static_cast<std::size_t>(ranks_));
    counts_.resize(static_cast<std::size_t>(ranks_));
  }

  // Samples this rank's parts. out[row] (and top[row * top_stride ..]) is written for every row of
  // which this rank holds a part; every such rank writes the same. Collective: every rank of the
  // communicator calls it, with its own parts (perhaps none).
  // Failure is collective too: when any rank throws (bad parts, a message that does not decode),
  // that rank still takes part in the round's first exchange, saying it failed, and then every rank
  // throws: the failing one its own exception, the others std::runtime_error naming the rank. No
  // rank waits for a round the others will never send.
  template <logit_type T>
  batch_stats sample(std::span<const shard_part<T>> parts, std::span<row_result> out,
                     std::span<token_logprob> top = {}, std::size_t top_stride = 0) {
    batch_stats st;
    std::exception_ptr failure;
    const auto attempt = [&](auto&& work) {
      if (failure) return;
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
    };
    attempt([&] {
      prepare(parts, out.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        const shard_part<T>& p = parts[i];
        // Mirostat's mu is the request's state, moved by the draw: each part draws on its own copy
        // (a rank may hold several shards of a row), written back once the row is done.
        requests_[i] = p.request;
        if (p.request.mirostat_mu) {
          mu_[i] = *p.request.mirostat_mu;
          requests_[i].mirostat_mu = &mu_[i];
        }
        local_[i].begin(*p.sampler, p.slice, p.v0, p.vocab, requests_[i], spaces_[i], p.shard);
      }
    });
    for (;;) {
      send_.clear();
      attempt([&] {
        for (std::size_t i = 0; i < parts.size(); ++i) {
          if (local_[i].done()) continue;
          encode_tagged(send_, {parts[i].row, parts[i].shard}, local_[i].outgoing());
        }
      });
      st.bytes_sent += send_.size();
      ++st.rounds;
      if (exchange(failure) == 0) break;  // every rank is done
      attempt([&] {
        decode();
        for (std::size_t i = 0; i < parts.size(); ++i) {
          if (local_[i].done()) continue;
          const std::size_t r = parts[i].row;
          if (arrived_[r] != parts[i].shards)
            throw std::runtime_error("nucleus::mpi::sharded_batch: row " + std::to_string(r) + " got " +
                                     std::to_string(arrived_[r]) + " messages for " +
                                     std::to_string(parts[i].shards) + " shards (are the parts consistent?)");
          local_[i].step(std::span<const shard_message>(inbox_[r].data(), parts[i].shards));
        }
      });
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::size_t r = parts[i].row;
      const std::span<token_logprob> t = top_stride ? top.subspan(r * top_stride, top_stride) : top.first(0);
      out[r] = local_[i].result(t);
      if (parts[i].request.mirostat_mu) *parts[i].request.mirostat_mu = mu_[i];
    }
    return st;
  }

 private:
  template <logit_type T>
  void prepare(std::span<const shard_part<T>> parts, std::size_t rows) {
    while (local_.size() < parts.size()) local_.emplace_back(budget_);
    if (spaces_.size() < parts.size()) {
      spaces_.resize(parts.size());
      requests_.resize(parts.size());
      mu_.resize(parts.size());
    }
    arrived_.assign(rows, 0);
    inbox_.resize(rows);
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const shard_part<T>& p = parts[i];
      if (p.sampler == nullptr)
        throw std::invalid_argument("nucleus::mpi::sharded_batch: a part has no sampler");
      if (p.row >= rows) throw std::invalid_argument("nucleus::mpi::sharded_batch: a part's row is past out");
      if (p.shard >= p.shards)
        throw std::invalid_argument("nucleus::mpi::sharded_batch: shard must be < shards");
      if (p.v0 + p.slice.size() > p.vocab)
        throw std::invalid_argument("nucleus::mpi::sharded_batch: a slice runs past the vocabulary");
      if (inbox_[p.row].size() < p.shards) inbox_[p.row].resize(p.shards);
    }
  }

  // The all-gather of every rank's packed messages; returns the total bytes (0: all done). A rank that
  // failed sends the size -1 instead; then every rank throws here, before the messages' exchange.
  std::size_t exchange(const std::exception_ptr& failure) {
    const long long mine = failure ? -1 : static_cast<long long>(send_.size());
    MPI_Allgather(&mine, 1, MPI_LONG_LONG, sizes_.data(), 1, MPI_LONG_LONG, comm_);
    if (failure) std::rethrow_exception(failure);
    for (std::size_t r = 0; r < sizes_.size(); ++r)
      if (sizes_[r] < 0)
        throw std::runtime_error("nucleus::mpi::sharded_batch: rank " + std::to_string(r) +
                                 " failed this batch (its own exception says why); every rank stops it");
    long long total = 0;
    for (std::size_t r = 0; r < sizes_.size(); ++r) {
      if (total + sizes_[r] > 0x7FFFFFFFll)
        throw std::runtime_error("nucleus::mpi::sharded_batch: a round's messages exceed 2 GiB");
      displs_[r] = static_cast<int>(total);
      counts_[r] = static_cast<int>(sizes_[r]);
      total += sizes_[r];
    }
    if (total == 0) return 0;
    recv_.resize(static_cast<std::size_t>(total));
    MPI_Allgatherv(send_.data(), static_cast<int>(mine), MPI_BYTE, recv_.data(), counts_.data(),
                   displs_.data(), MPI_BYTE, comm_);
    return static_cast<std::size_t>(total);
  }

  // Files every message under its row and shard; messages of rows this rank holds no part of are
  // read past.
  void decode() {
    std::fill(arrived_.begin(), arrived_.end(), 0);
    decode_tagged(recv_, [this](shard_tag t) -> shard_message& {
      if (t.row >= inbox_.size() || t.shard >= inbox_[t.row].size()) return scratch_;
      ++arrived_[t.row];
      return inbox_[t.row][t.shard];
    });
  }

  MPI_Comm comm_;
  std::size_t budget_;
  int ranks_ = 1;
  std::vector<shard_sampler> local_;
  std::vector<workspace> spaces_;
  std::vector<row_request> requests_;
  std::vector<float> mu_;
  std::vector<std::size_t> arrived_;  // messages received this round, per row
  std::vector<std::vector<shard_message>> inbox_;
  shard_message scratch_;
  std::vector<std::byte> send_, recv_;
  std::vector<long long> sizes_;
  std::vector<int> displs_, counts_;
};

}  // namespace nucleus::mpi
