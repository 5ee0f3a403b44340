// The C++ side of python/bench/overhead.py: batch_sampler::sample on a file's [B, V] float32 rows,
// timed per call the way overhead.py times nucleus.sample_batch (vLLM order, T 0.7, top-k 50, top-p
// 0.9, seed r for row r; the rows stay in cache as Python's do). Prints the median and minimum
// nanoseconds per call as JSON.
//   nucleus_py_overhead_bench FILE B V THREADS ITERS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/engine.hpp"

namespace nc = nucleus;

namespace {

std::vector<float> read_rows(const std::string& path, std::size_t n) {
  std::vector<float> out(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!f) throw std::runtime_error("short file " + path);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: nucleus_py_overhead_bench FILE B V THREADS ITERS\n";
    return 2;
  }
  const auto B = std::stoul(argv[2]), V = std::stoul(argv[3]), threads = std::stoul(argv[4]);
  const auto iters = std::stoul(argv[5]);
  const auto x = read_rows(argv[1], B * V);
  nc::sampling_params p;
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  std::vector<nc::sampler> samplers;
  for (std::size_t r = 0; r < B; ++r) {
    p.seed = r;
    samplers.emplace_back(p, nc::engine_order::vllm);
  }
  std::vector<nc::batch_row> rows(B);
  for (std::size_t r = 0; r < B; ++r) rows[r] = {&samplers[r], {}};
  std::vector<nc::row_result> out(B);
  nc::thread_pool pool(threads);
  nc::batch_sampler batch;
  const nc::logits_matrix<float> m{x.data(), B, V, V};
  std::vector<double> ns;
  for (std::size_t i = 0; i < iters + iters / 10 + 1; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (threads == 1)
      batch.sample(m, rows, out);
    else
      batch.sample(m, rows, out, pool);
    const auto t1 = std::chrono::steady_clock::now();
    if (i > iters / 10) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());  // warm-up
  }
  std::sort(ns.begin(), ns.end());
  std::printf("{\"median_ns\": %.0f, \"min_ns\": %.0f, \"token0\": %d}\n", ns[ns.size() / 2], ns[0],
              out[0].token);
  return 0;
}
