// The tokenizer a GGUF file describes (tokenizer.ggml.* metadata), through any weight source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nucleus/io/error.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/model/tokenizer.hpp"

namespace nucleus::model {

template <class S>
tokenizer_data read_tokenizer_data(const S& source) {
  tokenizer_data d;
  auto tokens = io::get_string_array(source, "tokenizer.ggml.tokens");
  if (!tokens) throw io::format_error(std::string(source.path()), "tokenizer.ggml.tokens", "missing");
  d.tokens = std::move(*tokens);
  if (auto merges = io::get_string_array(source, "tokenizer.ggml.merges")) d.merges = std::move(*merges);
  if (auto types = io::get_int_array(source, "tokenizer.ggml.token_type"))
    for (std::int64_t t : *types) d.token_types.push_back(static_cast<std::int32_t>(t));
  if (auto pre = io::get_string(source, "tokenizer.ggml.pre")) d.pre = *pre;
  auto id = [&](const char* key) { return static_cast<std::int32_t>(io::get_int(source, key).value_or(-1)); };
  d.bos = id("tokenizer.ggml.bos_token_id");
  d.eos = id("tokenizer.ggml.eos_token_id");
  d.unk = id("tokenizer.ggml.unknown_token_id");
  d.pad = id("tokenizer.ggml.padding_token_id");
  d.add_bos = io::get_bool(source, "tokenizer.ggml.add_bos_token").value_or(false);
  return d;
}

}  // namespace nucleus::model
