// Sampling a row that no rank holds whole. In a tensor-parallel engine the LM head leaves each rank
// with the logits of its own slice of the vocabulary. Rather than gathering the row to every rank (V
// floats each), the ranks call nucleus::mpi::sharded_batch: a few small all-gathers, after which
// every rank has the token, logprob, rank and top-n that sampler::sample gives on the whole row, bit
// for bit (docs/distributed.md).
//
//   mpirun -np 2 --oversubscribe build/examples/nucleus_example_sharded [--model PATH]
//
// Rank 0 runs SmolLM2 on a short prompt and broadcasts the logits (standing in for the LM head's
// slices); then the same with synthetic rows at V = 248,320. Exits 77 (skip) without the model.
#include <mpi.h>

#include <bit>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nucleus/engine.hpp>
#include <nucleus/mpi/sharded.hpp>

#include "model_common.hpp"

namespace nc = nucleus;

namespace {

struct knobs {
  const char* label;
  nc::sampler sampler;
};

std::vector<knobs> some_knobs() {
  std::vector<knobs> k;
  k.push_back({"nucleus   T=0 (greedy)", nc::presets::nucleus({.temperature = 0.0f, .logprobs = 5})});
  k.push_back({"nucleus   T=1", nc::presets::nucleus({.temperature = 1.0f, .seed = 1, .logprobs = 5})});
  k.push_back({"hf        T=0.7 top_p=0.9",
               nc::presets::hf({.temperature = 0.7f, .top_p = 0.9f, .seed = 2, .logprobs = 5})});
  k.push_back({"vllm      T=0.8 top_k=40",
               nc::presets::vllm({.temperature = 0.8f, .top_k = 40, .seed = 3, .logprobs = 5})});
  k.push_back({"llama_cpp T=0.8 min_p=0.05",
               nc::presets::llama_cpp({.temperature = 0.8f, .min_p = 0.05f, .seed = 4, .logprobs = 5})});
  // Knobs without a sharded algorithm still give the exact result: the shards gather the row.
  k.push_back({"hf        T=1 typical_p=0.9 (gathers)",
               nc::presets::hf({.temperature = 1.0f, .typical_p = 0.9f, .seed = 5, .logprobs = 5})});
  return k;
}

// Samples `row` sharded across the ranks (each rank passes only its slice to the sampler) and checks
// the result against sampler::sample on the whole row. `text` names a token (rank 0 prints).
// Returns the number of ranks whose result differed.
int sample_and_check(std::span<const float> row, const std::vector<knobs>& all, std::size_t step,
                     const std::function<std::string(std::int32_t)>& text) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::size_t V = row.size(), P = static_cast<std::size_t>(ranks), r = static_cast<std::size_t>(rank);
  const std::size_t v0 = V * r / P, v1 = V * (r + 1) / P;  // this rank's ids: [v0, v1)
  const std::span<const float> slice = row.subspan(v0, v1 - v0);

  nc::mpi::sharded_batch sharded(MPI_COMM_WORLD);  // reusable: keep one per engine
  nc::workspace ws(V);
  int differ = 0;
  for (const knobs& k : all) {
    nc::row_request rq;
    rq.position = step;  // the draw key's position: the same on every rank
    // One part: this rank's shard of row 0. A batch passes one part per (row, shard) it holds.
    const nc::mpi::shard_part<float> part{.sampler = &k.sampler,
                                          .row = 0,
                                          .shard = r,
                                          .shards = P,
                                          .slice = slice,
                                          .v0 = v0,
                                          .vocab = V,
                                          .request = rq};
    nc::row_result got;
    std::vector<nc::token_logprob> top(5);
    const nc::mpi::batch_stats st = sharded.sample(std::span(&part, 1), std::span(&got, 1),
                                                   std::span<nc::token_logprob>(top), top.size());

    // The check (an engine would not have the whole row): the unsharded sampler, bit for bit.
    std::vector<nc::token_logprob> want_top(5);
    const nc::row_result want = k.sampler.sample(row, ws, rq, std::span<nc::token_logprob>(want_top));
    bool same = got == want;
    for (std::uint32_t i = 0; same && i < want.top_count; ++i)
      same = top[i].token == want_top[i].token && std::bit_cast<std::uint32_t>(top[i].logprob) ==
                                                      std::bit_cast<std::uint32_t>(want_top[i].logprob);
    int differ_here = same ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &differ_here, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    differ += differ_here;

    if (rank != 0) continue;
    std::printf("  %-40s '%s' logprob %.4f rank %d | top:", k.label, text(got.token).c_str(),
                static_cast<double>(got.logprob), got.rank);
    for (std::uint32_t i = 0; i < got.top_count; ++i)
      std::printf(" '%s' %.3f", text(top[i].token).c_str(), static_cast<double>(top[i].logprob));
    std::printf("\n  %-40s %zu rounds, %zu bytes sent by rank 0 (gathering: %zu); %s\n", "", st.rounds,
                st.bytes_sent, slice.size() * sizeof(float),
                differ_here == 0 ? "equals the unsharded sampler's result on every rank"
                                 : "DIFFERS from the unsharded sampler's result");
  }
  return differ;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string model_path;
  if (argc == 3 && std::string(argv[1]) == "--model") model_path = argv[2];

  // Rank 0 runs the model; the others learn V from it (0: no model).
  std::unique_ptr<nc::examples::loaded_model> m;
  std::vector<float> row;
  long long V = 0;
  if (rank == 0 && nc::examples::resolve_model(model_path, "nucleus_example_sharded")) {
    try {
      m = nc::examples::load_model(model_path, 128);
      std::vector<std::pair<std::string, std::string>> messages = {
          {"user", "What is the capital of France?"}};
      const std::vector<std::int32_t> ids = m->tok.encode(nc::model::chatml(messages, true));
      const std::span<const float> logits = m->net.prefill(ids);
      row.assign(logits.begin(), logits.end());
      V = static_cast<long long>(row.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nucleus_example_sharded: %s\n", e.what());
    }
  }
  MPI_Bcast(&V, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (V == 0) {
    if (rank == 0) std::printf("NUCLEUS_SKIP: no model (scripts/get-model)\n");
    MPI_Finalize();
    return 77;
  }
  row.resize(static_cast<std::size_t>(V));
  MPI_Bcast(row.data(), static_cast<int>(V), MPI_FLOAT, 0, MPI_COMM_WORLD);

  const std::vector<knobs> all = some_knobs();
  int differ = 0;
  if (rank == 0)
    std::printf("SmolLM2's next token after \"What is the capital of France?\", V = %lld over %d ranks:\n", V,
                ranks);
  differ += sample_and_check(row, all, 0, [&](std::int32_t id) { return m ? m->tok.token_text(id) : ""; });

  // Synthetic rows at Qwen3-Next's V: a normal body with a few spikes, and a flat row whose top-p
  // nucleus holds most of the vocabulary (the shards then exchange histograms, not leaders).
  const std::size_t big = 248320;
  std::mt19937_64 rng(42);  // the same seed on every rank: the same row
  std::normal_distribution<float> body(0.0f, 2.5f);
  std::vector<float> peaky(big), flat(big);
  for (float& x : peaky) x = body(rng);
  for (std::size_t i = 0; i < 8; ++i) peaky[rng() % big] = 12.0f + static_cast<float>(i) * 0.5f;
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (float& x : flat) x = u(rng);
  auto id_text = [](std::int32_t id) { return std::to_string(id); };
  if (rank == 0) std::printf("\nA synthetic peaky row, V = %zu:\n", big);
  differ += sample_and_check(peaky, all, 1, id_text);
  if (rank == 0) std::printf("\nA synthetic flat row, V = %zu:\n", big);
  differ += sample_and_check(flat, all, 2, id_text);

  if (rank == 0) std::printf("\n%s\n", differ == 0 ? "all equal" : "SOME RESULTS DIFFER");
  MPI_Finalize();
  return differ == 0 ? 0 : 1;
}
