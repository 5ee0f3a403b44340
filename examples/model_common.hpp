// What the model examples share: finding the default model, loading it with its tokenizer.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nucleus/io/gguf.hpp>
#include <nucleus/model/gguf_tokenizer.hpp>
#include <nucleus/model/llama.hpp>
#include <nucleus/model/tokenizer.hpp>

namespace nucleus::examples {

// scripts/get-model's cache: $NUCLEUS_CACHE or ~/.cache/nucleus.
inline std::optional<std::filesystem::path> default_model() {
  std::filesystem::path dir;
  if (const char* c = std::getenv("NUCLEUS_CACHE")) {
    dir = c;
  } else if (const char* h = std::getenv("HOME")) {
    dir = std::filesystem::path(h) / ".cache" / "nucleus";
  } else {
    return std::nullopt;
  }
  const auto p = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (std::filesystem::exists(p)) return p;
  return std::nullopt;
}

struct loaded_model {
  io::gguf_file file;
  model::llama net;
  model::tokenizer tok;
};

inline std::unique_ptr<loaded_model> load_model(const std::filesystem::path& path,
                                                std::int64_t context = 2048) {
  io::gguf_file file = io::gguf_file::open(path);
  model::llama net = model::llama::load(file, model::load_options{context});
  model::tokenizer tok(model::read_tokenizer_data(file));
  return std::unique_ptr<loaded_model>(new loaded_model{std::move(file), std::move(net), std::move(tok)});
}

}  // namespace nucleus::examples
