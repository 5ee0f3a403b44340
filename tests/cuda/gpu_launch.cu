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

  ~device_batch() {
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
  return "";
}

std::string download(const device_batch& d, std::uint32_t rows, batch_out& out) {
  out.tokens.resize(rows);
  out.logprobs.resize(rows);
  out.statuses.resize(rows);
  GPU_TRY(cudaMemcpy(out.tokens.data(), d.tokens, rows * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.logprobs.data(), d.logprobs, rows * sizeof(float), cudaMemcpyDeviceToHost));
  GPU_TRY(cudaMemcpy(out.statuses.data(), d.statuses, rows, cudaMemcpyDeviceToHost));
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
  return download(d, in.rows, out);
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
    if (std::string e = download(d, in.rows, outs.back()); !e.empty()) return e;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return "";
}

}  // namespace gpu_launch
