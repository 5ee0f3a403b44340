// Element types of weight tensors: names, ggml block layouts and GGUF type ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace nucleus::io {

// Element types a weight source can hand out. Quantized types store blocks of block_elements(t)
// values in block_bytes(t) bytes along the innermost dimension (ggml's layouts).
enum class dtype : std::uint8_t {
  f32,
  f16,
  bf16,
  q8_0,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k
};

constexpr std::string_view name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::f16:
      return "f16";
    case dtype::bf16:
      return "bf16";
    case dtype::q8_0:
      return "q8_0";
    case dtype::q4_0:
      return "q4_0";
    case dtype::q4_1:
      return "q4_1";
    case dtype::q5_0:
      return "q5_0";
    case dtype::q5_1:
      return "q5_1";
    case dtype::q2_k:
      return "q2_k";
    case dtype::q3_k:
      return "q3_k";
    case dtype::q4_k:
      return "q4_k";
    case dtype::q5_k:
      return "q5_k";
    case dtype::q6_k:
      return "q6_k";
  }
  return "unknown";
}

constexpr std::int64_t block_elements(dtype t) {
  switch (t) {
    case dtype::f32:
    case dtype::f16:
    case dtype::bf16:
      return 1;
    case dtype::q8_0:
    case dtype::q4_0:
    case dtype::q4_1:
    case dtype::q5_0:
    case dtype::q5_1:
      return 32;
    case dtype::q2_k:
    case dtype::q3_k:
    case dtype::q4_k:
    case dtype::q5_k:
    case dtype::q6_k:
      return 256;
  }
  return 1;
}

constexpr std::int64_t block_bytes(dtype t) {
  switch (t) {
    case dtype::f32:
      return 4;
    case dtype::f16:
    case dtype::bf16:
      return 2;
    case dtype::q8_0:
      return 2 + 32;
    case dtype::q4_0:
      return 2 + 16;
    case dtype::q4_1:
      return 2 + 2 + 16;
    case dtype::q5_0:
      return 2 + 4 + 16;
    case dtype::q5_1:
      return 2 + 2 + 4 + 16;
    case dtype::q2_k:
      return 16 + 64 + 2 + 2;
    case dtype::q3_k:
      return 32 + 64 + 12 + 2;
    case dtype::q4_k:
      return 2 + 2 + 12 + 128;
    case dtype::q5_k:
      return 2 + 2 + 12 + 32 + 128;
    case dtype::q6_k:
      return 128 + 64 + 16 + 2;
  }
  return 1;
}

constexpr bool is_quantized(dtype t) {
  return block_elements(t) > 1;
}

// ggml's type ids, as stored in GGUF tensor infos.
constexpr std::uint32_t ggml_type_id(dtype t) {
  switch (t) {
    case dtype::f32:
      return 0;
    case dtype::f16:
      return 1;
    case dtype::q4_0:
      return 2;
    case dtype::q4_1:
      return 3;
    case dtype::q5_0:
      return 6;
    case dtype::q5_1:
      return 7;
    case dtype::q8_0:
      return 8;
    case dtype::q2_k:
      return 10;
    case dtype::q3_k:
      return 11;
    case dtype::q4_k:
      return 12;
    case dtype::q5_k:
      return 13;
    case dtype::q6_k:
      return 14;
    case dtype::bf16:
      return 30;
  }
  return ~0u;
}

constexpr std::optional<dtype> dtype_from_ggml(std::uint32_t id) {
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q5_0,
                  dtype::q5_1, dtype::q2_k, dtype::q3_k, dtype::q4_k, dtype::q5_k, dtype::q6_k}) {
    if (ggml_type_id(t) == id) return t;
  }
  return std::nullopt;
}

// ggml's name for a type id this library does not read, so errors can say what the file holds.
constexpr std::string_view ggml_type_name(std::uint32_t id) {
  constexpr std::string_view names[] = {
      "f32",      "f16",      "q4_0",    "q4_1",  "q4_2",       "q4_3",       "q5_0",       "q5_1",
      "q8_0",     "q8_1",     "q2_k",    "q3_k",  "q4_k",       "q5_k",       "q6_k",       "q8_k",
      "iq2_xxs",  "iq2_xs",   "iq3_xxs", "iq1_s", "iq4_nl",     "iq3_s",      "iq2_s",      "iq4_xs",
      "i8",       "i16",      "i32",     "i64",   "f64",        "iq1_m",      "bf16",       "q4_0_4_4",
      "q4_0_4_8", "q4_0_8_8", "tq1_0",   "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4"};
  return id < sizeof names / sizeof names[0] ? names[id] : std::string_view("unknown");
}

}  // namespace nucleus::io
