// Sharded sampling over MPI against the gather engines do today. Run under mpirun -np P: each rank
// holds its contiguous 1/P of the row (a tensor-parallel LM head's output), and each token is drawn
//   (a) sharded: nucleus::mpi::sharded_batch, one part per rank, a few small all-gathers;
//   (b) gathered: MPI_Allgatherv of the slices as float to every rank, then sampler::sample on the
//       whole row.
// Per V and chain: the median time per token (the slowest rank's, an MPI_Barrier before each row)
// over --rows rows after --warmup, and the bytes each rank sends per row. Every row's sharded result
// must equal the gathered one on every rank (exit 1 otherwise). Rank 0 prints a markdown table.
//
//   mpirun -np 4 --oversubscribe build/bench/nucleus_mpi_sharded_bench [--rows N] [--warmup N] [--vocab V]
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"
#include "nucleus/engine.hpp"
#include "nucleus/mpi/sharded.hpp"
#include "nucleus/sharded/split.hpp"

namespace nc = nucleus;
namespace nb = nucleus::bench;

namespace {

struct chain_case {
  const char* name;
  bool flat;  // uniform(-0.5, 0.5) rows (top-p's nucleus holds most of the vocabulary), else peaky
  nc::sampling_params params;
};

const std::array<chain_case, 6> chains{{
    {"greedy", false, {.temperature = 0.0f, .seed = 1}},
    {"top-k 40, T 0.7", false, {.temperature = 0.7f, .top_k = 40, .seed = 2}},
    {"min-p 0.05, T 1", false, {.temperature = 1.0f, .min_p = 0.05f, .seed = 3}},
    {"categorical, T 1", false, {.temperature = 1.0f, .seed = 4}},
    {"top-p 0.9, T 1, peaky", false, {.temperature = 1.0f, .top_p = 0.9f, .seed = 5}},
    {"top-p 0.9, T 1, flat", true, {.temperature = 1.0f, .top_p = 0.9f, .seed = 6}},
}};

const char* route_name(nc::shard_sampler::path p) {
  switch (p) {
    case nc::shard_sampler::path::gather:
      return "gather";
    case nc::shard_sampler::path::greedy:
      return "greedy";
    case nc::shard_sampler::path::top_k:
      return "top_k";
    case nc::shard_sampler::path::top_p:
      return "top_p";
    case nc::shard_sampler::path::dense:
      return "dense";
  }
  return "?";
}

// A few distinct rows per kind, cycled (every rank builds the same bits from the same seeds).
constexpr std::size_t distinct_rows = 4;

std::vector<nb::aligned_floats> make_rows(std::size_t vocab, bool flat) {
  std::vector<nb::aligned_floats> rows;
  for (std::size_t r = 0; r < distinct_rows; ++r) {
    const std::uint64_t seed = 0x6D7069ull + vocab * 31 + r;
    if (!flat) {
      rows.push_back(nb::make_peaky_logits(vocab, seed));
      continue;
    }
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    nb::aligned_floats x(vocab);
    for (float& v : x) v = u(rng);
    rows.push_back(std::move(x));
  }
  return rows;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct measured {
  double sharded_us = 0, gather_us = 0;
  double sharded_bytes = 0, gather_bytes = 0;  // per row, per rank (the most any rank sent)
  double rounds = 0;                           // per row (mean)
  long long differ = 0;                        // rows whose results differ, over every rank
};

measured run_case(const chain_case& c, std::size_t vocab, std::size_t rows, std::size_t warmup, int rank,
                  int ranks) {
  const std::vector<nb::aligned_floats> data = make_rows(vocab, c.flat);
  const nc::sampler s(c.params);
  // Rank r holds [v0, v1): the even cut split_sampler uses.
  const auto P = static_cast<std::size_t>(ranks), me = static_cast<std::size_t>(rank);
  const std::size_t v0 = vocab * me / P, v1 = vocab * (me + 1) / P;
  std::vector<int> counts(P), displs(P);
  for (std::size_t r = 0; r < P; ++r) {
    displs[r] = static_cast<int>(vocab * r / P);
    counts[r] = static_cast<int>(vocab * (r + 1) / P) - displs[r];
  }
  nc::mpi::sharded_batch sharded(MPI_COMM_WORLD);
  nc::workspace ws(vocab);
  nb::aligned_floats whole(vocab);
  std::vector<double> t_sharded, t_gather;
  double bytes = 0, rounds = 0;
  long long differ = 0;
  for (std::size_t i = 0; i < warmup + rows; ++i) {
    const std::span<const float> row(data[i % distinct_rows].data(), vocab);
    const std::span<const float> slice = row.subspan(v0, v1 - v0);
    nc::row_request rq;
    rq.position = i;

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    const nc::mpi::shard_part<float> part{&s, 0, me, P, slice, v0, vocab, rq};
    nc::row_result got;
    const nc::mpi::batch_stats st = sharded.sample(std::span<const nc::mpi::shard_part<float>>(&part, 1),
                                                   std::span<nc::row_result>(&got, 1));
    const double ts = MPI_Wtime() - t0;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    MPI_Allgatherv(slice.data(), static_cast<int>(slice.size()), MPI_FLOAT, whole.data(), counts.data(),
                   displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
    const nc::row_result want = s.sample(std::span<const float>(whole.data(), vocab), ws, rq);
    const double tg = MPI_Wtime() - t0;

    if (!(got == want) || want.status != nc::status::ok) {
      if (++differ <= 3)
        std::fprintf(stderr, "rank %d: %s V %zu row %zu: sharded token %d (status %d), gathered %d (%d)\n",
                     rank, c.name, vocab, i, got.token, static_cast<int>(got.status), want.token,
                     static_cast<int>(want.status));
    }
    if (i < warmup) continue;
    t_sharded.push_back(ts);
    t_gather.push_back(tg);
    bytes += static_cast<double>(st.bytes_sent);
    rounds += static_cast<double>(st.rounds);
  }
  // A token is ready when the slowest rank has it: the per-row maximum over the ranks.
  std::vector<double> max_s(rows), max_g(rows);
  MPI_Allreduce(t_sharded.data(), max_s.data(), static_cast<int>(rows), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(t_gather.data(), max_g.data(), static_cast<int>(rows), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  measured m;
  m.sharded_us = median(max_s) * 1e6;
  m.gather_us = median(max_g) * 1e6;
  double most_bytes = 0;
  MPI_Allreduce(&bytes, &most_bytes, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  m.sharded_bytes = most_bytes / static_cast<double>(rows);
  m.gather_bytes = static_cast<double>(*std::max_element(counts.begin(), counts.end())) * sizeof(float);
  m.rounds = rounds / static_cast<double>(rows);
  MPI_Allreduce(&differ, &m.differ, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::size_t rows = 200, warmup = 20;
  std::vector<std::size_t> vocabs{151936, 248320};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const auto n = static_cast<std::size_t>(std::strtoull(argv[i + 1], nullptr, 10));
    if (a == "--rows") {
      rows = std::max<std::size_t>(n, 1);
    } else if (a == "--warmup") {
      warmup = n;
    } else if (a == "--vocab") {
      vocabs = {std::max<std::size_t>(n, static_cast<std::size_t>(ranks))};
    } else {
      if (rank == 0) std::fprintf(stderr, "usage: %s [--rows N] [--warmup N] [--vocab V]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (rank == 0) {
    std::printf("P = %d ranks; median over %zu rows after %zu warm-up rows; time = the slowest rank's\n\n",
                ranks, rows, warmup);
    std::printf(
        "| V | chain | route | rounds | sharded µs | gather µs | gather / sharded time "
        "| sharded B/row/rank | gather B/row/rank | gather / sharded bytes |\n");
    std::printf("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  long long differ = 0;
  for (std::size_t vocab : vocabs)
    for (const chain_case& c : chains) {
      const measured m = run_case(c, vocab, rows, warmup, rank, ranks);
      differ += m.differ;
      if (rank != 0) continue;
      // The route the shards take (the same on every rank): one untimed split of the row in memory.
      const nc::sampler s(c.params);
      nc::split_sampler split(s, static_cast<std::size_t>(ranks));
      std::vector<std::size_t> cuts(static_cast<std::size_t>(ranks) + 1);
      for (std::size_t r = 0; r < cuts.size(); ++r) cuts[r] = vocab * r / static_cast<std::size_t>(ranks);
      const std::vector<nb::aligned_floats> one = make_rows(vocab, c.flat);
      split.sample(std::span<const float>(one[0].data(), vocab), std::span<const std::size_t>(cuts), {});
      std::printf("| %zu | %s | %s | %.1f | %.1f | %.1f | %.2f | %.0f | %.0f | %.0f |\n", vocab, c.name,
                  route_name(split.route()), m.rounds, m.sharded_us, m.gather_us, m.gather_us / m.sharded_us,
                  m.sharded_bytes, m.gather_bytes, m.gather_bytes / m.sharded_bytes);
      std::fflush(stdout);
    }
  if (rank == 0)
    std::printf("\n%s: every row's sharded result %s the gathered one on every rank\n",
                differ == 0 ? "ok" : "FAILED", differ == 0 ? "equals" : "does NOT equal");
  MPI_Finalize();
  return differ == 0 ? 0 : 1;
}
