#include <nucleus/io/gguf.hpp>

#include <catch2/catch.hpp>

#include <random>

#include "test_files.hpp"

using namespace nucleus::io;
using Catch::Matchers::Contains;
using nucleus_io_test::gguf_builder;
using nucleus_io_test::write_file;

namespace {

constexpr std::uint32_t f32_id = 0, q8_0_id = 8;

// A valid file with every interesting corner, and the offsets of the fields tests corrupt.
struct sample {
  gguf_builder b;
  std::size_t n_tensors_at, n_kv_at, first_key_len_at, ints_count_at, ints_type_at, bool_at, w_n_dims_at,
      w_ne0_at, w_type_at, w_offset_at, q_offset_at;
};

sample make_sample(std::uint32_t version = 3) {
  sample s;
  auto& b = s.b;
  b.header(version, 2, 6);
  s.n_tensors_at = 8;
  s.n_kv_at = 16;
  s.first_key_len_at = b.mark();
  b.kv_string("general.architecture", "llama");
  b.kv_u32("llama.block_count", 2);
  b.str("a.ints").put<std::uint32_t>(9);
  s.ints_type_at = b.mark();
  b.put<std::uint32_t>(5);
  s.ints_count_at = b.mark();
  b.put<std::uint64_t>(3).put<std::int32_t>(-1).put<std::int32_t>(0).put<std::int32_t>(7);
  b.str("a.empty").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(0);
  // [[1], []] as u8 arrays
  b.str("a.nested").put<std::uint32_t>(9).put<std::uint32_t>(9).put<std::uint64_t>(2);
  b.put<std::uint32_t>(0).put<std::uint64_t>(1).put<std::uint8_t>(1);
  b.put<std::uint32_t>(0).put<std::uint64_t>(0);
  b.str("a.flag").put<std::uint32_t>(7);
  s.bool_at = b.mark();
  b.put<std::uint8_t>(1);

  b.str("w");
  s.w_n_dims_at = b.mark();
  b.put<std::uint32_t>(2);
  s.w_ne0_at = b.mark();
  b.put<std::uint64_t>(4).put<std::uint64_t>(2);
  s.w_type_at = b.mark();
  b.put(f32_id);
  s.w_offset_at = b.mark();
  b.put<std::uint64_t>(0);
  b.str("q").put<std::uint32_t>(1).put<std::uint64_t>(32).put(q8_0_id);
  s.q_offset_at = b.mark();
  b.put<std::uint64_t>(32);
  b.pad(32);
  for (int i = 0; i < 8; ++i) b.put<float>(static_cast<float>(i) * 0.5f);
  b.pad(32);
  b.put<std::uint16_t>(0x3800);  // 0.5 in f16
  for (int i = 0; i < 32; ++i) b.put<std::int8_t>(static_cast<std::int8_t>(i - 16));
  return s;
}

void expect_format_error(const std::vector<std::byte>& bytes, std::string_view field, std::string_view what) {
  const auto path = write_file("hostile.gguf", bytes);
  try {
    (void)gguf_file::open(path);
    FAIL("the file opened, expected a format_error on " << field);
  } catch (const format_error& e) {
    CHECK(e.file() == path.string());
    CHECK(e.field() == field);
    CHECK_THAT(e.what(),
               Contains(path.string()) && Contains(std::string(field)) && Contains(std::string(what)));
  }
}

}  // namespace

TEST_CASE("gguf: a valid file reads back exactly", "[io][gguf]") {
  for (std::uint32_t version : {2u, 3u}) {
    const auto s = make_sample(version);
    const auto path = write_file("valid.gguf", s.b.bytes);
    const auto f = gguf_file::open(path);
    CHECK(f.version() == version);
    CHECK(f.path() == path.string());
    CHECK(f.alignment() == 32);
    CHECK(f.metadata_keys() == std::vector<std::string>{"general.architecture", "llama.block_count", "a.ints",
                                                        "a.empty", "a.nested", "a.flag"});
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.get_int("llama.block_count") == 2);
    CHECK(std::holds_alternative<std::uint32_t>(*f.find_metadata("llama.block_count")));
    CHECK(f.get_int_array("a.ints") == std::vector<std::int64_t>{-1, 0, 7});
    CHECK(f.get_string_array("a.empty") == std::vector<std::string>{});
    CHECK(as_array(*f.find_metadata("a.empty"))->element_type == metadata_type::string);
    const metadata_array& nested = *as_array(*f.find_metadata("a.nested"));
    REQUIRE(nested.values.size() == 2);
    CHECK(as_array(nested.values[0])->values == std::vector<metadata_value>{std::uint8_t{1}});
    CHECK(as_array(nested.values[1])->values.empty());
    CHECK(f.get_bool("a.flag") == true);
    CHECK(f.find_metadata("absent") == nullptr);
    CHECK(f.get_int("absent") == std::nullopt);

    CHECK(f.tensor_names() == std::vector<std::string>{"w", "q"});
    const tensor_view& w = *f.find_tensor("w");
    CHECK(w.shape == std::vector<std::int64_t>{2, 4});  // ne {4, 2} reversed
    CHECK(w.type == dtype::f32);
    CHECK(w.bytes.data() == f.tensors()[0].bytes.data());
    CHECK(dequantize(w) == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f});
    const tensor_view& q = *f.find_tensor("q");
    CHECK(q.shape == std::vector<std::int64_t>{32});
    CHECK(q.type == dtype::q8_0);
    CHECK(q.bytes.size() == 34);
    const auto qv = dequantize(q);
    for (int i = 0; i < 32; ++i) CHECK(qv[i] == static_cast<float>(i - 16) * 0.5f);
    CHECK(f.find_tensor("absent") == nullptr);
  }
}

TEST_CASE("gguf: views survive moving the file", "[io][gguf]") {
  const auto s = make_sample();
  auto f = gguf_file::open(write_file("move.gguf", s.b.bytes));
  const tensor_view* w = f.find_tensor("w");
  const auto before = dequantize(*w);
  gguf_file moved = std::move(f);
  CHECK(moved.find_tensor("w") == w);
  CHECK(dequantize(*w) == before);
}

TEST_CASE("gguf: general.alignment moves the data section", "[io][gguf]") {
  gguf_builder b;
  b.header(3, 1, 1).kv_u32("general.alignment", 64).tensor_info("t", {4}, f32_id, 0).pad(64);
  const auto data_at = b.mark();
  for (int i = 0; i < 4; ++i) b.put<float>(static_cast<float>(i));
  const auto f = gguf_file::parse(b.bytes, "aligned.gguf");
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() == data_at);
  CHECK(dequantize(*f.find_tensor("t")) == std::vector<float>{0, 1, 2, 3});

  for (std::uint32_t bad : {0u, 3u, 48u}) {
    gguf_builder c;
    c.header(3, 0, 1).kv_u32("general.alignment", bad);
    expect_format_error(c.bytes, "metadata key 'general.alignment'", "power of two");
  }
  gguf_builder c;
  c.header(3, 0, 1).kv_string("general.alignment", "32");
  expect_format_error(c.bytes, "metadata key 'general.alignment'", "power of two");
}

TEST_CASE("gguf: the wrong file or version is named", "[io][gguf]") {
  expect_format_error({}, "magic", "truncated");
  auto s = make_sample();
  s.b.bytes[3] = std::byte{'X'};
  expect_format_error(s.b.bytes, "magic", "not a GGUF file");
  for (auto [version, what] : {std::pair<std::uint32_t, const char*>{1, "version 1"},
                               {4, "unknown version 4"},
                               {0x03000000, "big-endian"}}) {
    auto v = make_sample();
    v.b.patch<std::uint32_t>(4, version);
    expect_format_error(v.b.bytes, "version", what);
  }
}

TEST_CASE("gguf: absurd counts are refused before anything is allocated", "[io][gguf]") {
  auto s = make_sample();
  s.b.patch<std::uint64_t>(s.n_tensors_at, std::uint64_t{1} << 60);
  expect_format_error(s.b.bytes, "n_tensors", "cannot fit");
  s = make_sample();
  s.b.patch<std::uint64_t>(s.n_kv_at, ~std::uint64_t{0});
  expect_format_error(s.b.bytes, "n_kv", "cannot fit");
  s = make_sample();
  s.b.patch<std::uint64_t>(s.first_key_len_at, std::uint64_t{1} << 40);
  expect_format_error(s.b.bytes, "key of metadata entry #0", "string length");
  s = make_sample();
  s.b.patch<std::uint64_t>(s.ints_count_at, std::uint64_t{1} << 61);
  expect_format_error(s.b.bytes, "metadata key 'a.ints'", "cannot fit");
}

// A hostile file is small; what it claims is not. Every declared size is held to what the mapped
// file can hold before anything is allocated: the error names the field, the file stays 1 KB.
TEST_CASE("gguf: a 1 KB file claiming 2^40 elements or 2^31 strings is refused", "[io][gguf]") {
  auto kilobyte = [](gguf_builder& b) {
    b.pad(32);
    while (b.bytes.size() < 1024) b.put<float>(1.0f);
    REQUIRE(b.bytes.size() == 1024);
  };
  {
    gguf_builder b;
    b.header(3, 1, 1).kv_string("general.architecture", "llama");
    b.tensor_info("token_embd.weight", {std::uint64_t{1} << 20, std::uint64_t{1} << 20}, f32_id, 0);
    kilobyte(b);
    expect_format_error(b.bytes, "tensor 'token_embd.weight'", "runs past the end of the file at 1024");
  }
  {
    gguf_builder b;
    b.header(3, 0, 2).kv_string("general.architecture", "llama");
    b.str("tokenizer.ggml.tokens").put<std::uint32_t>(9).put<std::uint32_t>(8);
    b.put<std::uint64_t>(std::uint64_t{1} << 31);
    for (int i = 0; i < 4; ++i) b.str("tok");
    kilobyte(b);
    expect_format_error(b.bytes, "metadata key 'tokenizer.ggml.tokens'",
                        "array of 2147483648 string cannot fit");
  }
}

TEST_CASE("gguf: corrupt metadata values are named", "[io][gguf]") {
  auto s = make_sample();
  s.b.patch<std::uint32_t>(s.ints_type_at, 99);
  expect_format_error(s.b.bytes, "metadata key 'a.ints'", "unknown value type 99");
  s = make_sample();
  s.b.patch<std::uint8_t>(s.bool_at, 2);
  expect_format_error(s.b.bytes, "metadata key 'a.flag'", "not 0 or 1");

  gguf_builder dup;
  dup.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_format_error(dup.bytes, "metadata key 'k'", "duplicate");

  gguf_builder deep;
  deep.header(3, 0, 1).str("deep").put<std::uint32_t>(9);
  for (int i = 0; i < 100; ++i) deep.put<std::uint32_t>(9).put<std::uint64_t>(1);
  deep.put<std::uint32_t>(0).put<std::uint64_t>(0);
  std::string deep_field = "metadata key 'deep'";
  for (int i = 0; i < 64; ++i) deep_field += "[0]";
  expect_format_error(deep.bytes, deep_field, "nested deeper than 64");

  gguf_builder bad_element;
  bad_element.header(3, 0, 1).str("s").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(2);
  bad_element.str("ok").put<std::uint64_t>(1000);
  expect_format_error(bad_element.bytes, "metadata key 's'[1]", "string length 1000");
}

TEST_CASE("gguf: corrupt tensor infos are named", "[io][gguf]") {
  struct corruption {
    std::size_t sample::*field;
    std::uint64_t value;
    int width;
    const char* what;
  };
  const corruption cases[] = {
      {&sample::w_n_dims_at, 0, 4, "n_dims is 0"},
      {&sample::w_n_dims_at, 5, 4, "n_dims is 5"},
      {&sample::w_ne0_at, 0, 8, "ne[0] is 0"},
      {&sample::w_ne0_at, ~std::uint64_t{0}, 8, "ne[0] is -1"},
      {&sample::w_ne0_at, std::uint64_t{1} << 62, 8, "element count overflows"},
      {&sample::w_type_at, 99, 4, "type 99 (unknown) is not supported"},
      {&sample::w_type_at, 9, 4, "type 9 (q8_1) is not supported"},
      {&sample::w_type_at, q8_0_id, 4, "not a multiple of the q8_0 block size"},
      {&sample::w_offset_at, 33, 8, "not a multiple of the alignment"},
      {&sample::w_offset_at, 4096, 8, "runs past the end"},
      {&sample::w_offset_at, ~std::uint64_t{0} - 31, 8, "runs past the end"},
  };
  for (const auto& c : cases) {
    auto s = make_sample();
    const std::size_t at = s.*(c.field);
    if (c.width == 4) {
      s.b.patch<std::uint32_t>(at, static_cast<std::uint32_t>(c.value));
    } else {
      s.b.patch<std::uint64_t>(at, c.value);
    }
    INFO(c.what);
    expect_format_error(s.b.bytes, "tensor 'w'", c.what);
  }

  gguf_builder big;  // numel fits int64, its bytes do not fit uint64
  big.header(3, 1, 0).tensor_info("big", {std::uint64_t{1} << 62}, f32_id, 0);
  expect_format_error(big.bytes, "tensor 'big'", "byte size overflows");

  gguf_builder dup;
  dup.header(3, 2, 0).tensor_info("t", {8}, f32_id, 0).tensor_info("t", {8}, f32_id, 32).pad(32);
  for (int i = 0; i < 16; ++i) dup.put<float>(0);
  expect_format_error(dup.bytes, "tensor 't'", "duplicate tensor name");

  auto s = make_sample();
  s.b.patch<std::uint64_t>(s.q_offset_at, 64);
  expect_format_error(s.b.bytes, "tensor 'q'", "runs past the end");
}

TEST_CASE("gguf: every truncation is a format_error naming the file", "[io][gguf]") {
  const auto s = make_sample();
  for (std::size_t n = 0; n < s.b.bytes.size(); ++n) {
    const std::vector<std::byte> cut(s.b.bytes.begin(), s.b.bytes.begin() + static_cast<std::ptrdiff_t>(n));
    INFO("length " << n);
    try {
      (void)gguf_file::parse(cut, "cut.gguf");
      FAIL("a truncated file parsed");
    } catch (const format_error& e) {
      CHECK(e.file() == "cut.gguf");
      CHECK_FALSE(e.field().empty());
    }
  }
}

TEST_CASE("gguf: random corruption never escapes as anything but format_error", "[io][gguf]") {
  const auto s = make_sample();
  std::mt19937_64 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto bytes = s.b.bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng());
    try {
      const auto f = gguf_file::parse(bytes, "fuzz.gguf");
      for (const tensor_view& t : f.tensors()) {
        REQUIRE(t.bytes.data() >= bytes.data());
        REQUIRE(t.bytes.data() + t.bytes.size() <= bytes.data() + bytes.size());
        (void)dequantize(t);
      }
    } catch (const format_error& e) {
      ++rejected;
      REQUIRE(e.file() == "fuzz.gguf");
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("gguf: a missing file is a system_error naming it", "[io][gguf]") {
  const auto path = nucleus_io_test::scratch_dir() / "does-not-exist.gguf";
  CHECK_THROWS_WITH(gguf_file::open(path), Contains(path.string()));
  CHECK_THROWS_AS(gguf_file::open(path), std::system_error);
}
