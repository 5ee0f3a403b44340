// Sharded sampling over MPI ranks: 1,200 cases (tests/sharded/cases.hpp) cut into 1..8 shards at
// uneven boundaries, the shards dealt to the ranks in contiguous runs (several per rank when a row
// has more shards than there are ranks), sampled in batches of 8 rows per exchange. Every rank checks
// the rows it holds against sampler::sample on the whole row: token, logprob bits, rank, top-n bits
// and status; and, with 2 or more ranks, a rank that throws (before an exchange, or decoding one)
// ends the batch on every rank. Exits 1 on any difference (on every rank), 0 otherwise.
#include <mpi.h>

#include <bit>
#include <cstdio>
#include <nucleus/mpi/sharded.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "sharded/cases.hpp"

namespace nc = nucleus;
using nucleus_sharded_cases::make_case;
using nucleus_sharded_cases::request_of;
using nucleus_sharded_cases::sharded_case;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  constexpr std::size_t cases = 1200, batch = 8, top_n = 8;
  long long checked = 0, differ = 0, bytes = 0, rounds = 0;
  nc::mpi::sharded_batch sharded(MPI_COMM_WORLD);
  nc::workspace ws;
  for (std::size_t b0 = 0; b0 < cases; b0 += batch) {
    std::vector<sharded_case> cs;
    std::vector<nc::sampler> samplers;
    std::vector<nc::row_request> requests;
    for (std::size_t i = b0; i < b0 + batch && i < cases; ++i) cs.push_back(make_case(i));
    for (const sharded_case& c : cs) samplers.emplace_back(c.params, c.order);
    for (const sharded_case& c : cs) requests.push_back(request_of(c));
    // Mirostat's mu is request state: this rank's copy for the sharded draw, another for the check.
    std::vector<float> mu(cs.size()), mu_check(cs.size());
    for (std::size_t r = 0; r < cs.size(); ++r) {
      mu[r] = mu_check[r] = 2.0f * cs[r].params.mirostat_tau;
      if (cs[r].params.mirostat != 0) requests[r].mirostat_mu = &mu[r];
    }
    std::vector<nc::mpi::shard_part<float>> parts;
    std::vector<bool> held(cs.size(), false);
    for (std::size_t r = 0; r < cs.size(); ++r) {
      const std::size_t shards = cs[r].cuts.size() - 1;
      for (std::size_t s = 0; s < shards; ++s) {
        if (static_cast<int>(s * static_cast<std::size_t>(ranks) / shards) != rank)
          continue;  // contiguous runs
        const std::size_t v0 = cs[r].cuts[s], v1 = cs[r].cuts[s + 1];
        parts.push_back({&samplers[r], r, s, shards, std::span<const float>(cs[r].row).subspan(v0, v1 - v0),
                         v0, cs[r].row.size(), requests[r]});
        held[r] = true;
      }
    }
    std::vector<nc::row_result> out(cs.size());
    std::vector<nc::token_logprob> top(cs.size() * top_n);
    const nc::mpi::batch_stats st =
        sharded.sample(std::span<const nc::mpi::shard_part<float>>(parts), std::span<nc::row_result>(out),
                       std::span<nc::token_logprob>(top), top_n);
    bytes += static_cast<long long>(st.bytes_sent);
    rounds += static_cast<long long>(st.rounds);
    for (std::size_t r = 0; r < cs.size(); ++r) {
      if (!held[r]) continue;
      std::vector<nc::token_logprob> want_top(top_n);
      ws.reserve(cs[r].row.size());
      nc::row_request check = requests[r];
      if (check.mirostat_mu) check.mirostat_mu = &mu_check[r];
      const nc::row_result want = samplers[r].sample(std::span<const float>(cs[r].row), ws, check,
                                                     std::span<nc::token_logprob>(want_top));
      // Bits, not values: operator== would take -0 for +0 (and fail every NaN).
      const nc::row_result& got = out[r];
      bool same = got.token == want.token && got.rank == want.rank && got.top_count == want.top_count &&
                  got.status == want.status &&
                  std::bit_cast<std::uint32_t>(got.logprob) == std::bit_cast<std::uint32_t>(want.logprob) &&
                  std::bit_cast<std::uint32_t>(mu[r]) == std::bit_cast<std::uint32_t>(mu_check[r]);
      for (std::uint32_t i = 0; same && i < want.top_count; ++i) {
        const nc::token_logprob& g = top[r * top_n + i];
        same = g.token == want_top[i].token &&
               std::bit_cast<std::uint32_t>(g.logprob) == std::bit_cast<std::uint32_t>(want_top[i].logprob);
      }
      ++checked;
      if (!same) {
        ++differ;
        if (differ <= 5)
          std::fprintf(stderr, "rank %d: case %zu differs (%s): token %d vs %d, status %d vs %d\n", rank,
                       b0 + r, cs[r].describe().c_str(), out[r].token, want.token,
                       static_cast<int>(out[r].status), static_cast<int>(want.status));
      }
    }
  }
  // A rank that throws: the last rank hands in a part without a sampler. Every rank must leave the
  // call with an exception (the failing one its own), none waiting for the others; then the next
  // batch runs normally, so the ranks are still in step.
  if (ranks >= 2) {
    constexpr std::size_t V = 1000;
    std::vector<float> row(V);
    for (std::size_t i = 0; i < V; ++i) row[i] = static_cast<float>((i * 37) % 101) * 0.1f;
    const nc::sampler smp(nc::sampling_params{.seed = 5});
    const std::size_t v0 = V * static_cast<std::size_t>(rank) / static_cast<std::size_t>(ranks);
    const std::size_t v1 = V * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(ranks);
    // fail: no sampler (refused before the first exchange); miscount: one shard more than the ranks
    // send (found after it, when this rank decodes the round and a message is missing).
    auto run = [&](bool fail, bool miscount = false) {
      const nc::mpi::shard_part<float> part{fail ? nullptr : &smp,
                                            0,
                                            static_cast<std::size_t>(rank),
                                            static_cast<std::size_t>(ranks) + (miscount ? 1 : 0),
                                            std::span<const float>(row).subspan(v0, v1 - v0),
                                            v0,
                                            V,
                                            nc::row_request{}};
      std::vector<nc::row_result> out(1);
      sharded.sample(std::span<const nc::mpi::shard_part<float>>(&part, 1), std::span<nc::row_result>(out));
      return out[0];
    };
    const bool failing = rank == ranks - 1;
    ws.reserve(V);
    const nc::row_result want = smp.sample(std::span<const float>(row), ws, nc::row_request{});
    for (const bool after_exchange : {false, true}) {
      int caught = 0;  // 1: the expected exception on this rank
      try {
        run(failing && !after_exchange, failing && after_exchange);
      } catch (const std::invalid_argument&) {
        caught = failing && !after_exchange;
      } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        caught = failing ? after_exchange && what.find("messages for") != std::string::npos
                         : what.find("rank " + std::to_string(ranks - 1)) != std::string::npos;
      }
      ++checked;
      if (!caught) {
        ++differ;
        std::fprintf(stderr,
                     "rank %d: a rank failing %s the exchange did not end in the expected exception here\n",
                     rank, after_exchange ? "after" : "before");
      }
      const nc::row_result after = run(false);
      ++checked;
      if (!(after.token == want.token &&
            std::bit_cast<std::uint32_t>(after.logprob) == std::bit_cast<std::uint32_t>(want.logprob))) {
        ++differ;
        std::fprintf(stderr, "rank %d: the batch after a failed one differs from the whole row\n", rank);
      }
    }
  }
  long long sums[3] = {checked, differ, bytes};
  long long totals[3] = {0, 0, 0};
  MPI_Allreduce(sums, totals, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf(
        "nucleus mpi sharded: %d ranks, %zu rows of 1..8 shards: %lld row results checked over the ranks, "
        "%lld "
        "identical, %lld differ; %lld rounds; %.0f bytes sent per row per rank (mean)\n",
        ranks, cases, totals[0], totals[0] - totals[1], totals[1], rounds,
        static_cast<double>(totals[2]) / static_cast<double>(cases) / ranks);
  MPI_Finalize();
  return totals[1] == 0 && totals[0] > 0 ? 0 : 1;
}
