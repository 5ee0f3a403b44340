// nucleus::cuda behind a C ABI, for bench/cuda/gpu_sampling.py (ctypes): a batch's knobs are made once
// on the host (make_row_params, per-row seeds), and each call samples device rows that a torch tensor
// holds, on the caller's stream. Built by scripts/gpu-check with nvcc into a shared library:
//   nvcc -std=c++20 -O2 -arch=sm_90 -Xcompiler -fPIC -shared -Iinclude bench/cuda/capi.cu -o libnucleus_cuda_bench.so
#include <nucleus/cuda/params.hpp>
#include <nucleus/cuda/sampler.cuh>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

struct bench_batch {
  std::uint32_t rows = 0;
  nucleus::cuda::row_params* params = nullptr;
  std::uint64_t *seeds = nullptr, *positions = nullptr;
  float* logprobs = nullptr;
  std::uint8_t* statuses = nullptr;
  ~bench_batch() {
    cudaFree(params);
    cudaFree(seeds);
    cudaFree(positions);
    cudaFree(logprobs);
    cudaFree(statuses);
  }
};

template <class T>
cudaError_t upload(T*& d, const T* h, std::size_t n) {
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&d), n * sizeof(T) + 1);
  if (e == cudaSuccess && n) e = cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice);
  return e;
}

void say(char* err, int len, const std::string& what) {
  if (err && len > 0) std::snprintf(err, static_cast<std::size_t>(len), "%s", what.c_str());
}

}  // namespace

extern "C" {

// One knob set for every row of a batch, in an engine order ("nucleus", "vllm", "hf", "llama_cpp");
// top_k <= 0, top_p = 1 and min_p = 0 are off. Row r draws with seeds[r], position 0, stream 0. Returns
// null (and the reason in err) on a bad knob or a CUDA error.
void* ncb_create(const char* order, int rows, float temperature, int top_k, float top_p, float min_p,
                 const unsigned long long* seeds, char* err, int err_len) {
  try {
    nucleus::engine_order o = nucleus::engine_order::nucleus;
    bool found = false;
    for (const auto& e : nucleus::detail::engine_orders)
      if (std::string(order) == e.name) o = e.order, found = true;
    if (!found) throw std::invalid_argument(std::string("unknown order ") + order);
    if (rows <= 0) throw std::invalid_argument("rows must be positive");
    auto* b = new bench_batch;
    b->rows = static_cast<std::uint32_t>(rows);
    std::vector<nucleus::cuda::row_params> params;
    std::vector<std::uint64_t> s(seeds, seeds + rows), zeros(static_cast<std::size_t>(rows), 0);
    for (int r = 0; r < rows; ++r) {
      nucleus::sampling_params p;
      p.temperature = temperature;
      p.top_k = top_k > 0 ? top_k : -1;
      p.top_p = top_p;
      p.min_p = min_p;
      p.seed = s[static_cast<std::size_t>(r)];
      params.push_back(nucleus::cuda::make_row_params(p, o));
    }
    cudaError_t e = upload(b->params, params.data(), params.size());
    if (e == cudaSuccess) e = upload(b->seeds, s.data(), s.size());
    if (e == cudaSuccess) e = upload(b->positions, zeros.data(), zeros.size());
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&b->logprobs), rows * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&b->statuses), static_cast<std::size_t>(rows));
    if (e != cudaSuccess) {
      delete b;
      throw std::runtime_error(cudaGetErrorString(e));
    }
    return b;
  } catch (const std::exception& x) {
    say(err, err_len, x.what());
    return nullptr;
  }
}

// Samples the batch's rows from device logits (dtype 0 float, 1 bf16, 2 f16; rows `stride` elements
// apart) into device int32 tokens, asynchronously on `stream` (a cudaStream_t, null: the default).
// Returns the cudaError_t of the launch.
int ncb_sample(void* batch, const void* logits, int dtype, int vocab, long long stride, int* tokens,
               void* stream) {
  const auto* b = static_cast<const bench_batch*>(batch);
  nucleus::cuda::batch_view v;
  v.logits = logits;
  v.dtype = dtype == 1 ? nucleus::logit_dtype::bf16 : dtype == 2 ? nucleus::logit_dtype::f16 : nucleus::logit_dtype::f32;
  v.rows = b->rows;
  v.vocab = static_cast<std::uint32_t>(vocab);
  v.stride = static_cast<std::size_t>(stride);
  v.params = b->params;
  v.seeds = b->seeds;
  v.positions = b->positions;
  v.tokens = tokens;
  v.logprobs = b->logprobs;
  v.statuses = b->statuses;
  return static_cast<int>(nucleus::cuda::sample_batch(v, static_cast<cudaStream_t>(stream)));
}

// The statuses of the last call (rows bytes, nucleus::status values) into host memory.
int ncb_statuses(void* batch, unsigned char* out) {
  const auto* b = static_cast<const bench_batch*>(batch);
  return static_cast<int>(cudaMemcpy(out, b->statuses, b->rows, cudaMemcpyDeviceToHost));
}

void ncb_destroy(void* batch) { delete static_cast<bench_batch*>(batch); }

}  // extern "C"
