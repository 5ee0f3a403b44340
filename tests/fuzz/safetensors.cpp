// libFuzzer harness: the input is a config.json and a safetensors file. Layout: a 2-byte little-endian
// length n, n bytes of JSON (exposed as metadata, as config.json beside the file is), then the
// safetensors bytes. JSON that does not parse is skipped (nlohmann's parser is not under test).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <nlohmann/json.hpp>
#include <nucleus/io/safetensors.hpp>

#include "exercise_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace io = nucleus::io;
  using nucleus_fuzz::check;
  nucleus_fuzz::input in(data, size);
  const std::size_t config_size = in.u16();
  const std::span<const std::uint8_t> config = in.take(config_size);
  const std::span<const std::uint8_t> file = in.rest();
  std::optional<io::safetensors_file> parsed;
  try {
    parsed.emplace(io::safetensors_file::parse(std::as_bytes(file), "fuzz.safetensors"));
  } catch (const io::format_error& e) {
    nucleus_fuzz::refused("parse", e);
    return 0;
  }
  io::safetensors_file& f = *parsed;
  for (const io::tensor_view& t : f.tensors()) {
    const auto* begin = reinterpret_cast<const std::uint8_t*>(t.bytes.data());
    check(t.bytes.empty() || (begin >= file.data() && begin + t.bytes.size() <= file.data() + file.size()));
  }
  const nlohmann::json j = nlohmann::json::parse(config.begin(), config.end(), nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    f.add_config(j);
    for (const auto& [key, value] : j.items()) {
      if (const io::metadata_value* v = f.find_metadata(key)) nucleus_fuzz::touch(*v);
    }
  }
  nucleus_fuzz::exercise_tensors(f);
  nucleus_fuzz::exercise_tokenizer(f);
  nucleus_fuzz::exercise_model(f);
  return 0;
}
