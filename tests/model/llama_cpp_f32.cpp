// SmolLM2-135M-Instruct, all weights in f32 (tests/interop/make_f32.py), against llama.cpp on the same
// file (tests/interop/interop.py record-f32): the fidelity comparison. Both sides then do every product
// in f32, so the goals are exact agreement on the top-1 and the tokens, and logits within 0.05.
#include <nucleus/io/gguf.hpp>
#include <nucleus/model/gguf_tokenizer.hpp>
#include <nucleus/model/llama.hpp>
#include <nucleus/model/tokenizer.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

using nucleus::model::llama;

constexpr double max_delta_goal = 0.05;
constexpr std::size_t min_prompts = 15, min_positions = 300;
constexpr std::size_t top_k = 16;  // the Q4_1 comparison's window, reported alongside the full rows

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<float> read_rows(const std::filesystem::path& p, std::size_t count) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  std::vector<float> rows(count);
  in.read(reinterpret_cast<char*>(rows.data()), static_cast<std::streamsize>(count * sizeof(float)));
  REQUIRE(in.gcount() == static_cast<std::streamsize>(count * sizeof(float)));
  REQUIRE(in.peek() == std::ifstream::traits_type::eof());
  return rows;
}

std::size_t argmax(std::span<const float> row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

TEST_CASE("llama: SmolLM2-135M in f32 agrees with llama.cpp in f32", "[smollm2_f32]") {
  const std::filesystem::path model_path = env("NUCLEUS_SMOLLM2_F32_GGUF");
  const std::filesystem::path ref_path = env("NUCLEUS_LLAMA_CPP_F32_LOGITS");
  REQUIRE(std::filesystem::exists(model_path));  // nucleus_interop_make_f32 writes it
  REQUIRE(std::filesystem::exists(ref_path));    // nucleus_interop_record_f32 writes it

  nlohmann::json ref;
  {
    std::ifstream in(ref_path);
    ref = nlohmann::json::parse(in);
  }
  const auto& prompts = ref.at("prompts");
  const auto V = ref.at("vocab").get<std::size_t>();
  std::size_t positions = 0;
  for (const auto& p : prompts) positions += p.at("tokens").size();
  const std::vector<float> theirs =
      read_rows(ref_path.parent_path() / ref.at("rows").get<std::string>(), positions * V);

  const auto file = nucleus::io::gguf_file::open(model_path);
  llama m = llama::load(file, {.context = 512});
  const nucleus::model::tokenizer tok(nucleus::model::read_tokenizer_data(file));
  REQUIRE(static_cast<std::size_t>(m.vocab()) == V);

  std::size_t top1 = 0, same_tokens = 0, offset = 0;
  double max_delta = 0, max_delta_top = 0, sum_delta = 0, min_margin = 1e9;
  for (const auto& p : prompts) {
    const std::string text = p.at("text");
    const auto tokens = p.at("tokens").get<std::vector<std::int32_t>>();
    const std::vector<std::int32_t> ours_tokens = tok.encode(text);
    if (ours_tokens == tokens) {
      ++same_tokens;
    } else {
      UNSCOPED_INFO("tokenization differs: " << text);
    }
    m.reset();
    const std::span<const float> logits = m.prefill(tokens, true);
    for (std::size_t t = 0; t < tokens.size(); ++t, ++offset) {
      const std::span<const float> ours = logits.subspan(t * V, V);
      const std::span<const float> row(theirs.data() + offset * V, V);
      const std::size_t best = argmax(row);
      if (argmax(ours) == best) {
        ++top1;
      } else {
        UNSCOPED_INFO("top-1 differs at position " << t << " of: " << text);
      }
      std::vector<float> sorted(row.begin(), row.end());
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<>());
      min_margin = std::min(min_margin, double(sorted[0]) - double(sorted[1]));
      const float kth = [&] {
        std::nth_element(sorted.begin(), sorted.begin() + top_k - 1, sorted.end(), std::greater<>());
        return sorted[top_k - 1];
      }();
      for (std::size_t i = 0; i < V; ++i) {
        const double d = std::abs(double(ours[i]) - double(row[i]));
        max_delta = std::max(max_delta, d);
        sum_delta += d;
        if (row[i] >= kth) max_delta_top = std::max(max_delta_top, d);
      }
    }
  }
  std::cout << "SmolLM2-135M f32 vs llama.cpp f32 (" << ref.at("llama_cpp_python").get<std::string>()
            << ", KV cache " << ref.at("kv_cache").get<std::string>() << ") over " << positions
            << " positions of " << prompts.size() << " prompts: top-1 agreement " << top1 << "/" << positions
            << ", max|dlogit| " << max_delta << " over the full vocabulary (" << max_delta_top
            << " over llama.cpp's top " << top_k << "), mean|dlogit| " << sum_delta / double(positions * V)
            << ", smallest llama.cpp top-2 margin " << min_margin << ", tokenization identical for "
            << same_tokens << "/" << prompts.size() << " prompts\n";
  CHECK(prompts.size() >= min_prompts);
  CHECK(positions >= min_positions);
  CHECK(same_tokens == prompts.size());
  CHECK(top1 == positions);
  CHECK(max_delta <= max_delta_goal);
}
