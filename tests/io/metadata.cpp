#include <nucleus/io/metadata.hpp>

#include <catch2/catch.hpp>

#include <map>

using namespace nucleus::io;
using Catch::Matchers::Contains;

namespace {

// The smallest metadata_source: a map and a name.
struct map_source {
  std::map<std::string, metadata_value, std::less<>> values;
  const metadata_value* find_metadata(std::string_view key) const {
    auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
  std::string_view path() const { return "model.bin"; }
};
static_assert(metadata_source<map_source>);

metadata_value array_of(metadata_type t, std::vector<metadata_value> v) {
  return metadata_array{t, std::move(v)};
}

}  // namespace

TEST_CASE("metadata: every integer kind reads as int64", "[io][metadata]") {
  CHECK(as_int(metadata_value(std::uint8_t{255})) == 255);
  CHECK(as_int(metadata_value(std::int8_t{-128})) == -128);
  CHECK(as_int(metadata_value(std::uint16_t{65535})) == 65535);
  CHECK(as_int(metadata_value(std::int16_t{-32768})) == -32768);
  CHECK(as_int(metadata_value(std::uint32_t{4294967295u})) == 4294967295);
  CHECK(as_int(metadata_value(std::int32_t{-7})) == -7);
  CHECK(as_int(metadata_value(std::int64_t{INT64_MIN})) == INT64_MIN);
  CHECK(as_int(metadata_value(std::uint64_t{INT64_MAX})) == INT64_MAX);
  CHECK(as_int(metadata_value(std::uint64_t{UINT64_MAX})) == std::nullopt);
  CHECK(as_int(metadata_value(true)) == std::nullopt);
  CHECK(as_int(metadata_value(1.0)) == std::nullopt);
  CHECK(as_float(metadata_value(2.5f)) == 2.5);
  CHECK(as_float(metadata_value(std::int32_t{10000})) == 10000.0);
  CHECK(as_float(metadata_value(std::string("1"))) == std::nullopt);
  CHECK(type_of(metadata_value(std::int16_t{1})) == metadata_type::i16);
  CHECK(type_of(metadata_value(false)) == metadata_type::boolean);
  CHECK(type_of(array_of(metadata_type::u8, {})) == metadata_type::array);
  CHECK(name(metadata_type::f64) == "f64");
}

TEST_CASE("metadata: look-ups name the file and key when the type is wrong", "[io][metadata]") {
  map_source s;
  s.values["n"] = std::uint32_t{12};
  s.values["eps"] = 1e-5f;
  s.values["name"] = std::string("tiny");
  s.values["flag"] = true;
  s.values["tokens"] = array_of(metadata_type::string, {std::string("a"), std::string("b")});
  s.values["ids"] = array_of(metadata_type::i32, {std::int32_t{3}, std::int32_t{-4}});
  s.values["scores"] = array_of(metadata_type::f32, {0.5f, -1.0f});
  s.values["mixed"] = array_of(metadata_type::i32, {std::int32_t{3}, std::string("x")});

  CHECK(get_int(s, "n") == 12);
  CHECK(get_float(s, "eps") == static_cast<double>(1e-5f));
  CHECK(get_float(s, "n") == 12.0);
  CHECK(get_string(s, "name") == "tiny");
  CHECK(get_bool(s, "flag") == true);
  CHECK(get_string_array(s, "tokens") == std::vector<std::string>{"a", "b"});
  CHECK(get_int_array(s, "ids") == std::vector<std::int64_t>{3, -4});
  CHECK(get_float_array(s, "scores") == std::vector<float>{0.5f, -1.0f});
  CHECK(get_float_array(s, "ids") == std::vector<float>{3.0f, -4.0f});
  CHECK(get_int(s, "absent") == std::nullopt);
  CHECK(get_string_array(s, "absent") == std::nullopt);

  CHECK_THROWS_AS(get_int(s, "name"), format_error);
  CHECK_THROWS_WITH(get_int(s, "name"),
                    Contains("model.bin") && Contains("'name'") && Contains("found string"));
  CHECK_THROWS_WITH(get_string(s, "n"), Contains("model.bin") && Contains("'n'") && Contains("found u32"));
  CHECK_THROWS_WITH(get_bool(s, "n"), Contains("'n'"));
  CHECK_THROWS_WITH(get_int_array(s, "tokens"), Contains("'tokens'") && Contains("array of string"));
  CHECK_THROWS_WITH(get_int_array(s, "mixed"), Contains("'mixed'"));
  CHECK_THROWS_WITH(get_string_array(s, "n"), Contains("'n'"));
  CHECK_THROWS_WITH(require_int(s, "absent"),
                    Contains("model.bin") && Contains("'absent'") && Contains("missing"));
  CHECK(require_float(s, "eps") == static_cast<double>(1e-5f));
  CHECK(require_string(s, "name") == "tiny");
  try {
    (void)get_float(s, "tokens");
    FAIL("no throw");
  } catch (const format_error& e) {
    CHECK(e.file() == "model.bin");
    CHECK(e.field() == "metadata key 'tokens'");
  }
}

TEST_CASE("metadata: values compare deeply", "[io][metadata]") {
  const metadata_value a = array_of(metadata_type::array, {array_of(metadata_type::u8, {std::uint8_t{1}})});
  metadata_value b = array_of(metadata_type::array, {array_of(metadata_type::u8, {std::uint8_t{1}})});
  CHECK(a == b);
  b = array_of(metadata_type::array, {array_of(metadata_type::u8, {std::uint8_t{2}})});
  CHECK_FALSE(a == b);
  CHECK_FALSE(metadata_value(std::uint8_t{1}) == metadata_value(std::int8_t{1}));  // the kind matters
}
