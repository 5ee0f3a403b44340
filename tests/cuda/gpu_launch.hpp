// The GPU side of tests/cuda/gpu_check.cpp, compiled by nvcc in gpu_launch.cu: plain C++ types only,
// so the checking program (compiled by the host compiler) needs no CUDA header.
#pragma once

#include <nucleus/core/logit_types.hpp>
#include <nucleus/cuda/row_params.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpu_launch {

struct batch_in {
  nucleus::logit_dtype dtype = nucleus::logit_dtype::f32;
  std::uint32_t rows = 0, vocab = 0;
  std::size_t stride = 0;
  std::vector<unsigned char> logits;  // rows x stride elements, host memory
  std::vector<nucleus::cuda::row_params> params;
  std::vector<std::uint64_t> seeds, positions, streams;
  std::vector<std::uint32_t> lists;  // the list arena make_row_params filled
  // Each row's histories and bitmask, at offsets into `tokens` and `masks` (mask_at < 0: none).
  struct row_span {
    std::size_t prompt_at = 0, prompt_size = 0, output_at = 0, output_size = 0;
    long long mask_at = -1;
  };
  std::vector<row_span> spans;
  std::vector<std::int32_t> tokens;
  std::vector<std::uint32_t> masks;
  std::uint32_t top_n = 0;  // top-n room per row
  std::vector<float> mu;    // each row's mirostat mu before the launch (rows without mirostat: unused)
  bool processors = false;  // some row needs the processed and counts buffers
};

struct batch_out {
  std::vector<std::int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::uint8_t> statuses;
  std::vector<std::int32_t> ranks;
  std::vector<std::uint32_t> top_counts;
  std::vector<std::int32_t> top_ids;  // rows x top_n
  std::vector<float> top_logprobs;
  bool counts_zero = true;  // the penalties' counts were all zero again after the launch
  std::vector<float> mu;    // each row's mirostat mu after the launch
  double ms = 0;            // the kernel's time
};

// "" when a device is there (its name in `name`), else why not.
std::string device(std::string& name);
// Uploads, samples, downloads; "" on success, else the CUDA error.
std::string run(const batch_in& in, batch_out& out);
// The same batch captured once in a CUDA graph, then replayed with each position set written to the
// device array in turn (the graph's arguments never change): one output per replay. mu is uploaded
// once, so each replay's mirostat rows start from the mu the one before left.
std::string run_graph(const batch_in& in, const std::vector<std::vector<std::uint64_t>>& positions,
                      std::vector<batch_out>& outs);

}  // namespace gpu_launch
