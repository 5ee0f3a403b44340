// libFuzzer harness: the input is a GGUF file, parsed in memory (gguf_file::parse).
#include <cstddef>
#include <cstdint>
#include <span>

#include <nucleus/io/gguf.hpp>

#include "exercise_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace io = nucleus::io;
  using nucleus_fuzz::check;
  std::optional<io::gguf_file> parsed;
  try {
    parsed.emplace(io::gguf_file::parse(std::as_bytes(std::span(data, size)), "fuzz.gguf"));
  } catch (const io::format_error& e) {
    nucleus_fuzz::refused("parse", e);
    return 0;
  }
  const io::gguf_file& f = *parsed;
  bool any_bytes = false;  // a file without tensor data may end before its data section's padding
  for (const io::tensor_view& t : f.tensors()) any_bytes = any_bytes || !t.bytes.empty();
  check(!any_bytes || f.data_offset() <= size);
  std::size_t h = 0;
  for (const std::string& key : f.metadata_keys()) {
    const io::metadata_value* v = f.find_metadata(key);
    check(v != nullptr);
    h += nucleus_fuzz::touch(*v);
  }
  for (const io::tensor_view& t : f.tensors()) {  // every tensor lies inside the input
    const auto* begin = reinterpret_cast<const std::uint8_t*>(t.bytes.data());
    check(t.bytes.empty() || (begin >= data && begin + t.bytes.size() <= data + size));
  }
  nucleus_fuzz::exercise_tensors(f);
  nucleus_fuzz::exercise_tokenizer(f);
  nucleus_fuzz::exercise_model(f);
  return static_cast<int>(h & 0);
}
