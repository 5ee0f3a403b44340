#include <nucleus/io/safetensors.hpp>
#include <nucleus/io/weight_source.hpp>

#include <catch2/catch.hpp>

#include <fstream>

#include "test_files.hpp"

using namespace nucleus::io;
using Catch::Matchers::Contains;
using nucleus_io_test::scratch_dir;
using nucleus_io_test::write_file;

static_assert(weight_source<safetensors_file>);

namespace {

std::vector<std::byte> safetensors_bytes(const std::string& header, std::span<const std::byte> data) {
  std::vector<std::byte> out(8);
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// 4 f32 (16 bytes) + 2 f16 (4 bytes) + 2 bf16 (4 bytes).
std::vector<std::byte> sample_data() {
  std::vector<std::byte> d(24);
  const float f[4] = {1, -2, 0.5f, 8};
  std::memcpy(d.data(), f, 16);
  const std::uint16_t h[2] = {0x3c00, 0xc400};  // 1, -4
  const std::uint16_t b[2] = {0x3f80, 0x4040};  // 1, 3
  std::memcpy(d.data() + 16, h, 4);
  std::memcpy(d.data() + 20, b, 4);
  return d;
}

const std::string sample_header = R"({"__metadata__":{"format":"pt"},)"
                                  R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[20,24]},)"
                                  R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                                  R"("h":{"dtype":"F16","shape":[1,2],"data_offsets":[16,20]}}   )";

void expect_error(const std::string& header, std::string_view field, std::string_view what,
                  std::vector<std::byte> data = sample_data()) {
  const auto path = write_file("hostile.safetensors", safetensors_bytes(header, data));
  try {
    (void)safetensors_file::open(path, scratch_dir() / "no-config.json.absent");
    FAIL("opened");
  } catch (const format_error& e) {
    CHECK(e.file() == path.string());
    CHECK(e.field() == field);
    CHECK_THAT(e.what(), Contains(path.string()) && Contains(std::string(what)));
  } catch (const std::exception& e) {
    // the absent config is only reached after a successful parse
    FAIL("unexpected " << e.what());
  }
}

}  // namespace

TEST_CASE("safetensors: a valid file reads back, with config.json as metadata", "[io][safetensors]") {
  const auto dir = scratch_dir() / "st_valid";
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.safetensors";
  {
    const auto bytes = safetensors_bytes(sample_header, sample_data());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::ofstream(dir / "config.json")
        << R"({"hidden_size": 576, "rms_norm_eps": 1e-05, "rope_theta": 10000, "model_type": "llama",
               "tie_word_embeddings": true, "eos_token_id": [1, 2], "rope_scaling": {"factor": 2.0}, "pad": null})";
  }
  const auto f = safetensors_file::open(path);
  CHECK(f.path() == path.string());
  CHECK(f.tensor_names() == std::vector<std::string>{"a", "h", "b"});  // data order
  const tensor_view& a = *f.find_tensor("a");
  CHECK(a.shape == std::vector<std::int64_t>{2, 2});
  CHECK(a.type == dtype::f32);
  CHECK(dequantize(a) == std::vector<float>{1, -2, 0.5f, 8});
  CHECK(dequantize(*f.find_tensor("h")) == std::vector<float>{1, -4});
  CHECK(dequantize(*f.find_tensor("b")) == std::vector<float>{1, 3});
  CHECK(f.find_tensor("__metadata__") == nullptr);
  CHECK(f.get_string("__metadata__.format") == "pt");
  CHECK(f.get_int("hidden_size") == 576);
  CHECK(f.get_float("rms_norm_eps") == 1e-05);
  CHECK(f.get_float("rope_theta") == 10000.0);
  CHECK(f.get_string("model_type") == "llama");
  CHECK(f.get_bool("tie_word_embeddings") == true);
  CHECK(f.get_int_array("eos_token_id") == std::vector<std::int64_t>{1, 2});
  CHECK(f.get_float("rope_scaling.factor") == 2.0);
  CHECK(f.find_metadata("pad") == nullptr);
  CHECK_THROWS_WITH(f.get_int("model_type"), Contains(path.string()) && Contains("'model_type'"));

  // An explicit config wins over the one beside the file.
  std::ofstream(dir / "other.json") << R"({"hidden_size": 64})";
  CHECK(safetensors_file::open(path, dir / "other.json").get_int("hidden_size") == 64);
  std::ofstream(dir / "broken.json") << R"({"hidden_size": )";
  CHECK_THROWS_WITH(safetensors_file::open(path, dir / "broken.json"), Contains("broken.json"));
  CHECK(load_json_config(dir / "config.json")["hidden_size"] == 576);
}

TEST_CASE("safetensors: hostile headers are named", "[io][safetensors]") {
  {
    const auto path = write_file("short.safetensors", std::vector<std::byte>(5));
    CHECK_THROWS_WITH(safetensors_file::open(path), Contains(path.string()) && Contains("header length"));
  }
  {
    auto bytes = safetensors_bytes(sample_header, sample_data());
    const std::uint64_t huge = std::uint64_t{1} << 50;
    std::memcpy(bytes.data(), &huge, 8);
    const auto path = write_file("huge.safetensors", bytes);
    CHECK_THROWS_WITH(safetensors_file::open(path), Contains(path.string()) && Contains("header length"));
  }
  expect_error(R"({"a": )", "header", "invalid JSON");
  expect_error(R"([1, 2])", "header", "not a JSON object");
  expect_error(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", "tensor 'a'",
               "I64 is not supported");
  expect_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8000]}})", "tensor 'a'",
               "outside the data");
  expect_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[12,8]}})", "tensor 'a'",
               "outside the data");
  expect_error(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", "tensor 'a'", "need 12");
  expect_error(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", "tensor 'a'", "non-negative");
  expect_error(R"({"a":{"dtype":"F32","shape":[4294967296, 4294967296],"data_offsets":[0,16]}})",
               "tensor 'a'", "overflows");
  expect_error(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]}})", "tensor 'a'",
               "need more");
  expect_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0.5,16]}})", "tensor 'a'", "data_offsets");
  expect_error(R"({"a":{"dtype":"F32","shape":[4]}})", "tensor 'a'", "data_offsets");
  expect_error(R"({"a":{"shape":[4],"data_offsets":[0,16]}})", "tensor 'a'", "dtype");
  expect_error(R"({"a":{"dtype":"F32","data_offsets":[0,16]}})", "tensor 'a'", "shape");
  expect_error(R"({"a":[1]})", "tensor 'a'", "not a JSON object");
  expect_error(R"({"__metadata__":[1]})", "__metadata__", "not a JSON object");
  expect_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               "tensor 'b'", "overlaps tensor 'a'");
  // An empty tensor between two that overlap hides nothing.
  expect_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"F32","shape":[0],)"
               R"("data_offsets":[8,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               "tensor 'b'", "overlaps tensor 'a'");
}

TEST_CASE("safetensors: a zero-size tensor overlaps nothing, wherever it sits", "[io][safetensors]") {
  // What the safetensors package writes: c at [16, 16], where b's bytes begin, and empties inside a.
  const std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                             R"("c":{"dtype":"F32","shape":[0,3],"data_offsets":[16,16]},)"
                             R"("d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                             R"("e":{"dtype":"BF16","shape":[2,0],"data_offsets":[8,8]},)"
                             R"("f":{"dtype":"F32","shape":[0],"data_offsets":[24,24]}})";
  const auto bytes = safetensors_bytes(header, sample_data());
  const auto f = safetensors_file::parse(bytes, "empty.safetensors");
  REQUIRE(f.tensors().size() == 6);
  CHECK(f.find_tensor("c")->shape == std::vector<std::int64_t>{0, 3});
  CHECK(f.find_tensor("c")->bytes.empty());
  CHECK(f.find_tensor("b")->bytes.size() == 4);
  // Data order, ties broken by the end and then the name: d a e c b f.
  std::string order;
  for (const auto& t : f.tensors()) order += t.name;
  CHECK(order == "daecbf");
}

TEST_CASE("safetensors: every truncation is a format_error naming the file", "[io][safetensors]") {
  const auto bytes = safetensors_bytes(sample_header, sample_data());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("length " << n);
    try {
      (void)safetensors_file::parse(std::span(bytes).first(n), "cut.safetensors");
      FAIL("a truncated file parsed");
    } catch (const format_error& e) {
      CHECK(e.file() == "cut.safetensors");
    }
  }
}
