// Against the PyPI gguf package (fixtures from make_fixtures.py). Every dequantizer is held to
// bit-exact agreement with gguf.quants.dequantize: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,
// q2_k, q3_k, q4_k, q5_k, q6_k. None is allowed even 1 ulp. And files the PyPI safetensors package
// writes, zero-size tensors included, open as it wrote them.
#include <nucleus/io/gguf.hpp>
#include <nucleus/io/safetensors.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <bit>
#include <fstream>

#include "test_files.hpp"

using namespace nucleus::io;
using nucleus_io_test::read_array;
using nucleus_io_test::read_file;

namespace nucleus_io_test {
extern std::filesystem::path fixture_dir;
}

namespace {

const std::filesystem::path& fixtures = nucleus_io_test::fixture_dir;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::size_t bit_mismatches(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    n += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
  return n;
}

std::optional<dtype> dtype_named(std::string_view s) {
  for (std::uint32_t id = 0; id < 64; ++id) {
    if (auto t = dtype_from_ggml(id); t && name(*t) == s) return t;
  }
  return std::nullopt;
}

// The reader's value must have exactly the kind and the bits the writer was given.
void check_value(const metadata_value& v, const nlohmann::json& j, const std::string& where) {
  INFO(where);
  REQUIRE(std::string(name(type_of(v))) == j["type"].get<std::string>());
  switch (type_of(v)) {
    case metadata_type::array: {
      const metadata_array& a = *as_array(v);
      CHECK(std::string(name(a.element_type)) == j["element_type"].get<std::string>());
      REQUIRE(a.values.size() == j["values"].size());
      for (std::size_t i = 0; i < a.values.size(); ++i) {
        check_value(a.values[i], j["values"][i], where + "[" + std::to_string(i) + "]");
      }
      break;
    }
    case metadata_type::f32:
      CHECK(std::bit_cast<std::uint32_t>(std::get<float>(v)) == j["bits"].get<std::uint32_t>());
      break;
    case metadata_type::f64:
      CHECK(std::bit_cast<std::uint64_t>(std::get<double>(v)) == j["bits"].get<std::uint64_t>());
      break;
    case metadata_type::string:
      CHECK(std::get<std::string>(v) == j["value"].get<std::string>());
      break;
    case metadata_type::boolean:
      CHECK(std::get<bool>(v) == j["value"].get<bool>());
      break;
    case metadata_type::u64:
      CHECK(std::get<std::uint64_t>(v) == j["value"].get<std::uint64_t>());
      break;
    default:
      CHECK(as_int(v) == j["value"].get<std::int64_t>());
      break;
  }
}

std::uint64_t checksum(std::span<const float> values) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i)
    sum += std::uint64_t{std::bit_cast<std::uint32_t>(values[i])} * (i + 1);
  return sum;
}

}  // namespace

TEST_CASE("dequantizers are bit-exact with gguf.quants.dequantize", "[gguf-py]") {
  for (const char* type_name :
       {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"}) {
    INFO(type_name);
    const auto type = dtype_named(type_name);
    REQUIRE(type);
    const auto blocks = read_file(fixtures / "quant" / (std::string(type_name) + ".bin"));
    const auto expected = read_array<float>(fixtures / "quant" / (std::string(type_name) + ".f32"));
    REQUIRE(expected.size() > 1000);
    std::vector<float> out(expected.size());
    dequantize(*type, blocks, out);
    CHECK(bit_mismatches(out, expected) == 0);
  }
}

TEST_CASE("GGUF files written by gguf.GGUFWriter read back exactly", "[gguf-py]") {
  for (const char* file : {"tiny", "tiny_align64"}) {
    INFO(file);
    const auto f = gguf_file::open(fixtures / (std::string(file) + ".gguf"));
    const auto expected = read_json(fixtures / (std::string(file) + ".json"));
    CHECK(f.version() == 3);
    CHECK(f.alignment() == (std::string(file) == "tiny" ? 32u : 64u));

    CHECK(f.metadata_keys().size() == expected["metadata"].size());
    for (const auto& [key, value] : expected["metadata"].items()) {
      const metadata_value* v = f.find_metadata(key);
      REQUIRE(v != nullptr);
      check_value(*v, value, key);
    }

    std::vector<std::string> names;
    for (const auto& t : expected["tensors"]) names.push_back(t["name"].get<std::string>());
    CHECK(f.tensor_names() == names);
    for (const auto& t : expected["tensors"]) {
      const auto tname = t["name"].get<std::string>();
      INFO(tname);
      const tensor_view* view = f.find_tensor(tname);
      REQUIRE(view != nullptr);
      CHECK(name(view->type) == t["type"].get<std::string>());
      CHECK(view->shape == t["shape"].get<std::vector<std::int64_t>>());
      const auto raw = read_file(fixtures / file / (tname + ".bin"));
      CHECK(std::equal(view->bytes.begin(), view->bytes.end(), raw.begin(), raw.end()));
      CHECK(reinterpret_cast<std::uintptr_t>(view->bytes.data()) % f.alignment() ==
            0);  // mmap is page aligned
      CHECK(bit_mismatches(dequantize(*view), read_array<float>(fixtures / file / (tname + ".f32"))) == 0);
    }
  }
}

TEST_CASE("safetensors files with zero-size tensors anywhere open as the package wrote them",
          "[safetensors-py]") {
  const auto manifest = read_json(fixtures / "safetensors.json");
  REQUIRE(manifest.size() >= 5);
  for (const auto& file : manifest) {
    const auto path = fixtures / file["file"].get<std::string>();
    INFO(path.string());
    const auto f = safetensors_file::open(path);  // an empty tensor overlaps nothing
    REQUIRE(f.tensors().size() == file["tensors"].size());
    for (const auto& t : file["tensors"]) {
      const auto tname = t["name"].get<std::string>();
      INFO(tname);
      const tensor_view* view = f.find_tensor(tname);
      REQUIRE(view != nullptr);
      CHECK(view->type == (t["dtype"] == "F32" ? dtype::f32 : dtype::f16));
      CHECK(view->shape == t["shape"].get<std::vector<std::int64_t>>());
      const auto offsets = t["offsets"].get<std::vector<std::size_t>>();
      CHECK(view->bytes.size() == offsets[1] - offsets[0]);
      std::string hex;
      for (std::byte b : view->bytes) {
        static constexpr char digits[] = "0123456789abcdef";
        hex += digits[std::to_integer<int>(b) >> 4];
        hex += digits[std::to_integer<int>(b) & 15];
      }
      CHECK(hex == t["hex"].get<std::string>());
    }
    // Data order, as the writer laid the bytes out: offsets never go back.
    for (std::size_t i = 1; i < f.tensors().size(); ++i) {
      CHECK(f.tensors()[i - 1].bytes.data() <= f.tensors()[i].bytes.data());
    }
  }
}

TEST_CASE("SmolLM2-135M Q4_1: every tensor opens and dequantizes as gguf does", "[smollm2]") {
  const auto expected = read_json(fixtures / "smollm2.json");
  const auto f = gguf_file::open(expected["path"].get<std::string>());  // every dtype in it is supported
  CHECK(f.tensors().size() == expected["tensors"].size());
  std::vector<float> values;
  for (const auto& t : expected["tensors"]) {
    const auto tname = t["name"].get<std::string>();
    INFO(tname);
    const tensor_view* view = f.find_tensor(tname);
    REQUIRE(view != nullptr);
    CHECK(name(view->type) == t["type"].get<std::string>());
    CHECK(view->shape == t["shape"].get<std::vector<std::int64_t>>());
    values.resize(static_cast<std::size_t>(view->numel()));
    dequantize(*view, values);
    CHECK(checksum(values) == t["checksum"].get<std::uint64_t>());
    const auto head = t["head_bits"].get<std::vector<std::uint32_t>>();
    const auto tail = t["tail_bits"].get<std::vector<std::uint32_t>>();
    for (std::size_t i = 0; i < head.size(); ++i) CHECK(std::bit_cast<std::uint32_t>(values[i]) == head[i]);
    for (std::size_t i = 0; i < tail.size(); ++i) {
      CHECK(std::bit_cast<std::uint32_t>(values[values.size() - tail.size() + i]) == tail[i]);
    }
  }

  for (const auto& [key, field] : expected["metadata"].items()) {
    INFO(key);
    const auto types = field["types"].get<std::vector<std::string>>();
    const auto& value = field["value"];
    REQUIRE(f.find_metadata(key) != nullptr);
    CHECK(std::string(name(type_of(*f.find_metadata(key)))) == types[0]);
    if (types[0] == "string") {
      CHECK(f.get_string(key) == value.get<std::string>());
    } else if (types[0] == "bool") {
      CHECK(f.get_bool(key) == value.get<bool>());
    } else if (types[0] == "f32" || types[0] == "f64") {
      CHECK(f.get_float(key) == value.get<double>());
    } else if (types[0] == "array" && types.back() == "string") {
      CHECK(f.get_string_array(key) == value.get<std::vector<std::string>>());
    } else if (types[0] == "array" && (types.back() == "f32" || types.back() == "f64")) {
      CHECK(f.get_float_array(key) == value.get<std::vector<float>>());
    } else if (types[0] == "array") {
      CHECK(f.get_int_array(key) == value.get<std::vector<std::int64_t>>());
    } else {
      CHECK(f.get_int(key) == value.get<std::int64_t>());
    }
  }
  // What the forward pass will ask for.
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.require_int("llama.block_count") == 30);
  CHECK(f.require_int("llama.embedding_length") == 576);
  CHECK(f.find_tensor("token_embd.weight")->shape == std::vector<std::int64_t>{49152, 576});
}
