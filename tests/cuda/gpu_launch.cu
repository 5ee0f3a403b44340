// nucleus/cuda/sampler.cuh driven for tests/cuda/gpu_check.cpp (see gpu_launch.hpp).
#include <nucleus/cuda/sampler.cuh>

#include "gpu_launch.hpp"

namespace gpu_launch {

namespace {

struct device_batch {
  void* logits = nullptr;
  nucleus::cuda::row_params* params = nullptr;
  std::uint64_t *seeds = nullptr, *positions = nullptr, *streams = nullptr;
  std::int32_t* tokens = nullptr;
  float* logprobs = nullptr;
  std::uint8_t* statuses = nullptr;
  std::int32_t *ranks = nullptr, *top_ids = nullptr, *history = nullptr;
  std::uint32_t *top_counts = nullptr, *lists = nullptr, *masks = nullptr, *counts = nullptr;
  float *top_logprobs = nullptr, *processed = nullptr, *mu = nullptr;
  nucleus::cuda::row_inputs* inputs = nullptr;
  std::size_t count_words = 0;

  ~device_batch() {
    cudaFree(ranks);
    cudaFree(top_ids);
    cudaFree(history);
    cudaFree(top_counts);
    cudaFree(lists);
    cudaFree(masks);
    cudaFree(counts);
    cudaFree(top_logprobs);
    cudaFree(processed);
    cudaFree(mu);
    cudaFree(inputs);
    cudaFree(logits);
    cudaFree(params);
    cudaFree(seeds);
    cudaFree(positions);
    cudaFree(streams);
    cudaFree(tokens);
    cudaFree(logprobs);
    cudaFree(statuses);
  }
};

#define GPU_TRY(x)                                                               \
  do {                                                                           \
    const cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) return std::string(#x ": ") + cudaGetErrorString(e_); \
  } while (0)

template <class T>
cudaError_t upload(T*& d, const T* h, std::size_t n) {
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(T) + 1);
  if (e == cudaSuccess && n) e = cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice);
  return e;
}

std::string prepare(const batch_in& in, device_batch& d, nucleus::cuda::batch_view& v) {
  unsigned char* logits = nullptr;
  GPU_TRY(upload(logits, in.logits.data(), in.logits.size()));
  d.logits = logits;
  GPU_TRY(upload(d.params, in.params.data(), in.rows));
  GPU_TRY(upload(d.seeds, in.seeds.data(), in.rows));
  GPU_TRY(upload(d.positions, in.positions.data(), in.rows));
  GPU_TRY(upload(d.streams, in.streams.data(), in.rows));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.tokens), in.rows * sizeof(std::int32_t) + 1));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.logprobs), in.rows * sizeof(float) + 1));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.statuses), in.rows + 1));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.ranks), in.rows * sizeof(std::int32_t) + 1));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.top_counts), in.rows * sizeof(std::uint32_t) + 1));
  const std::size_t top = static_cast<std::size_t>(in.rows) * in.top_n;
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.top_ids), top * sizeof(std::int32_t) + 1));
  GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.top_logprobs), top * sizeof(float) + 1));
  GPU_TRY(upload(d.lists, in.lists.data(), in.lists.size()));
  GPU_TRY(upload(d.history, in.tokens.data(), in.tokens.size()));
  GPU_TRY(upload(d.masks, in.masks.data(), in.masks.size()));
  std::vector<nucleus::cuda::row_inputs> inputs(in.rows);
  for (std::uint32_t r = 0; r < in.rows && r < in.spans.size(); ++r) {
    const batch_in::row_span& s = in.spans[r];
    inputs[r].prompt = d.history + s.prompt_at;
    inputs[r].prompt_size = static_cast<std::uint32_t>(s.prompt_size);
    inputs[r].output = d.history + s.output_at;
    inputs[r].output_size = static_cast<std::uint32_t>(s.output_size);
    inputs[r].bitmask = s.mask_at < 0 ? nullptr : d.masks + s.mask_at;
  }
  GPU_TRY(upload(d.inputs, inputs.data(), inputs.size()));
  GPU_TRY(upload(d.mu, in.mu.data(), in.mu.size()));
  if (in.processors) {
    d.count_words = static_cast<std::size_t>(in.rows) * in.vocab;
    GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.processed), d.count_words * sizeof(float)));
    GPU_TRY(cudaMalloc(reinterpret_cast<void**>(&d.counts), d.count_words * sizeof(std::uint32_t)));
    GPU_TRY(cudaMemset(d.counts, 0, d.count_words * sizeof(std::uint32_t)));
  }
  v.logits = d.logits;
  v.dtype = in.dtype;
  v.rows = in.rows;
  v.vocab = in.vocab;
  v.stride = in.stride;
  v.params = d.params;
  v.seeds = d.seeds;
  v.positions = d.positions;
  v.streams = d.streams;
  v.tokens = d.tokens;
  v.logprobs = d.logprobs;
  v.statuses = d.statuses;
  v.ranks = d.ranks;
  v.top_counts = d.top_counts;
  v.top_ids = d.top_ids;
  v.top_logprobs = d.top_logprobs;
  v.top_n = in.top_n;
  v.lists = d.lists;
  v.inputs = d.inputs;
  v.processed = d.processed;
  v.counts = d.counts;
  v.mirostat_mu = d.mu;
  return "";
}

std::string download(const device_batch& d, std::uint32_t rows, std::uint32_t top_n, batch_out& out) {
  out.tokens.resize(rows);
  out.logprobs.resize(rows);
  out.statuses.resize(rows);
  out.ranks.resize(rows);
  out.top_counts.resize(rows);
  out.top_ids.resize(static_cast<std::size_t>(rows) * top_n);
  out.top_logprobs.resize(static_cast<std::size_t>(rows) * top_n);
  GPU_TRY(cudaMemcpy(out.tokens.data(), d.tokens, rows * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.logprobs.data(), d.logprobs, rows * sizeof(float), cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.statuses.data(), d.statuses, rows, cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.ranks.data(), d.ranks, rows * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  GPU_TRY(
      cudaMemcpy(out.top_counts.data(), d.top_counts, rows * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.top_ids.data(), d.top_ids, out.top_ids.size() * sizeof(std::int32_t),
                     cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.top_logprobs.data(), d.top_logprobs, out.top_logprobs.size() * sizeof(float),
                     cudaMemcpyDeviceToHost));
  out.mu.resize(rows);
  GPU_TRY(cudaMemcpy(out.mu.data(), d.mu, rows * sizeof(float), cudaMemcpyDeviceToHost));
  out.counts_zero = true;
  if (d.counts) {  // the kernel must leave the penalties' counts as it found them: zero
    std::vector<std::uint32_t> counts(d.count_words);
    GPU_TRY(
        cudaMemcpy(counts.data(), d.counts, d.count_words * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    for (std::uint32_t c : counts)
      if (c != 0) out.counts_zero = false;
  }
  return "";
}

}  // namespace

std::string device(std::string& name) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  GPU_TRY(cudaGetDeviceProperties(&p, 0));
  name = p.name;
  return "";
}

std::string run(const batch_in& in, batch_out& out) {
  device_batch d;
  nucleus::cuda::batch_view v;
  if (std::string e = prepare(in, d, v); !e.empty()) return e;
  cudaEvent_t start, stop;
  GPU_TRY(cudaEventCreate(&start));
  GPU_TRY(cudaEventCreate(&stop));
  GPU_TRY(cudaEventRecord(start));
  GPU_TRY(nucleus::cuda::sample_batch(v));
  GPU_TRY(cudaEventRecord(stop));
  GPU_TRY(cudaEventSynchronize(stop));
  float ms = 0;
  GPU_TRY(cudaEventElapsedTime(&ms, start, stop));
  out.ms = ms;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return download(d, in.rows, in.top_n, out);
}

std::string run_graph(const batch_in& in, const std::vector<std::vector<std::uint64_t>>& positions,
                      std::vector<batch_out>& outs) {
  device_batch d;
  nucleus::cuda::batch_view v;
  if (std::string e = prepare(in, d, v); !e.empty()) return e;
  cudaStream_t s;
  GPU_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  GPU_TRY(nucleus::cuda::sample_batch(v, s));
  GPU_TRY(cudaStreamEndCapture(s, &graph));
  GPU_TRY(cudaGraphInstantiate(&exec, graph, 0));
  outs.clear();
  for (const auto& pos : positions) {
    GPU_TRY(
        cudaMemcpyAsync(d.positions, pos.data(), in.rows * sizeof(std::uint64_t), cudaMemcpyHostToDevice, s));
    GPU_TRY(cudaGraphLaunch(exec, s));
    GPU_TRY(cudaStreamSynchronize(s));
    outs.emplace_back();
    if (std::string e = download(d, in.rows, in.top_n, outs.back()); !e.empty()) return e;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return "";
}

}  // namespace gpu_launch
