// What the loader fuzzers do with a source that parsed: read every value, dequantize every tensor,
// build the tokenizer and a model with a small context, and run one token through it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include <nucleus/io/io.hpp>
#include <nucleus/model/gguf_tokenizer.hpp>
#include <nucleus/model/llama.hpp>
#include <nucleus/model/tokenizer.hpp>

#include "fuzz_input.hpp"

namespace nucleus_fuzz {

// With NUCLEUS_FUZZ_VERBOSE set, says why an input was refused (to check that seeds get through).
inline void refused(const char* stage, const std::exception& e) {
  static const bool verbose = std::getenv("NUCLEUS_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s: %s\n", stage, e.what());
}

// Touches every byte of a value so that ASan sees any read of freed or unowned memory.
inline std::size_t touch(const nucleus::io::metadata_value& v, int depth = 0) {
  namespace io = nucleus::io;
  check(depth < 64);  // the parser bounds nesting; a deeper value means it did not
  std::size_t h = static_cast<std::size_t>(io::type_of(v));
  if (auto i = io::as_int(v)) h += static_cast<std::size_t>(*i);
  if (auto f = io::as_float(v)) h += std::isnan(*f) ? 1 : 0;
  if (auto b = io::as_bool(v)) h += *b;
  if (const std::string* s = io::as_string(v))
    for (char c : *s) h += static_cast<unsigned char>(c);
  if (const io::metadata_array* a = io::as_array(v))
    for (const io::metadata_value& e : a->values) h += touch(e, depth + 1);
  return h;
}

template <class S>
void exercise_tensors(const S& source) {
  namespace io = nucleus::io;
  for (const io::tensor_view& t : source.tensors()) {
    check(source.find_tensor(t.name) != nullptr);
    check(t.numel() >= 0);
    std::vector<float> all;
    try {
      all = io::dequantize(t);
    } catch (const std::invalid_argument&) {
      continue;  // a type the dequantizer does not read (e.g. an integer tensor)
    }
    check(all.size() == static_cast<std::size_t>(t.numel()));
    if (t.rows() > 0) {  // the last row alone must read the same floats as the whole tensor
      std::vector<float> last(static_cast<std::size_t>(t.cols()));
      io::dequantize_rows(t, t.rows() - 1, 1, last);
      const std::size_t at = all.size() - last.size();
      for (std::size_t i = 0; i < last.size(); ++i) {
        const float a = all[at + i], b = last[i];
        check((std::isnan(a) && std::isnan(b)) || a == b);
      }
    }
  }
}

template <class S>
void exercise_tokenizer(const S& source) {
  namespace model = nucleus::model;
  try {
    const model::tokenizer tok(model::read_tokenizer_data(source));
    const std::vector<std::int32_t> ids =
        tok.encode("Hello, world! 1234 <|im_start|>user\n\xc3\xa9\xe2\x82\xac");
    for (std::int32_t id : ids) check(id >= 0 && id < tok.vocab_size());
    (void)tok.decode(ids);
  } catch (const nucleus::io::format_error& e) {
    refused("tokenizer", e);
  } catch (const std::invalid_argument& e) {
    refused("tokenizer", e);
  }
}

template <class S>
void exercise_model(const S& source) {
  namespace model = nucleus::model;
  try {
    model::llama m = model::llama::load(source, {.context = 4});
    const std::int32_t v = static_cast<std::int32_t>(m.vocab());
    check(v > 0);
    const std::vector<std::int32_t> tokens{0, v - 1};
    std::span<const float> logits = m.prefill(tokens);
    check(logits.size() == static_cast<std::size_t>(v));
    logits = m.decode(v / 2);
    check(logits.size() == static_cast<std::size_t>(v));
  } catch (const nucleus::io::format_error& e) {
    refused("model", e);
  } catch (const std::invalid_argument& e) {
    refused("model", e);
  }
}

}  // namespace nucleus_fuzz
