#include <nucleus/io/memory_source.hpp>
#include <nucleus/io/weight_source.hpp>

#include <catch2/catch.hpp>

using namespace nucleus::io;
using Catch::Matchers::Contains;

static_assert(weight_source<memory_source>);

TEST_CASE("memory_source: borrowed and owned tensors, metadata", "[io][memory_source]") {
  const std::vector<float> embed = {1, 2, 3, 4, 5, 6};
  memory_source src("engine");
  const tensor_view& e = src.add_tensor("embed", {3, 2}, embed);
  CHECK(e.bytes.data() == reinterpret_cast<const std::byte*>(embed.data()));  // borrowed, not copied
  src.add_owned_tensor("norm", {2}, std::vector<float>{0.5f, 0.25f});
  std::vector<std::byte> half_bytes = {std::byte{0x00}, std::byte{0x3c}, std::byte{0x00}, std::byte{0xc0}};
  src.add_owned_tensor("h", {2}, dtype::f16, half_bytes);
  src.set_metadata("llama.block_count", std::uint32_t{2});
  src.set_metadata("general.name", std::string("test"));

  CHECK(src.path() == "engine");
  CHECK(src.tensor_names() == std::vector<std::string>{"embed", "norm", "h"});
  CHECK(src.find_tensor("embed") == &e);
  CHECK(dequantize(*src.find_tensor("norm")) == std::vector<float>{0.5f, 0.25f});
  CHECK(dequantize(*src.find_tensor("h")) == std::vector<float>{1.0f, -2.0f});
  CHECK(src.get_int("llama.block_count") == 2);
  CHECK(src.get_string("general.name") == "test");
  CHECK(src.find_tensor("absent") == nullptr);
  CHECK(&require_tensor(src, "embed") == &e);
  CHECK_THROWS_WITH(require_tensor(src, "absent"), Contains("engine") && Contains("'absent'"));

  // Views stay valid as more tensors arrive and when the source moves.
  for (int i = 0; i < 100; ++i) {
    std::string name = "t";
    name += std::to_string(i);  // not "t" + ...: GCC 12 warns falsely (-Wrestrict)
    src.add_owned_tensor(name, {1}, std::vector<float>{float(i)});
  }
  memory_source moved = std::move(src);
  CHECK(moved.find_tensor("embed") == &e);
  CHECK(dequantize(*moved.find_tensor("t42")) == std::vector<float>{42.0f});
}

TEST_CASE("memory_source: rejects bytes that do not match the shape", "[io][memory_source]") {
  memory_source src("engine");
  const std::vector<float> v(5);
  CHECK_THROWS_WITH(src.add_tensor("x", {2, 3}, v),
                    Contains("engine") && Contains("'x'") && Contains("need 24"));
  CHECK_THROWS_WITH(src.add_owned_tensor("q", {3, 16}, dtype::q8_0, std::vector<std::byte>(34)),
                    Contains("'q'") && Contains("block size"));
  CHECK_THROWS_WITH(src.add_tensor("n", {-1, 4}, v), Contains("'n'"));
  src.add_tensor("ok", {5}, v);
  CHECK_THROWS_WITH(src.add_tensor("ok", {5}, v), Contains("added twice"));
  CHECK(src.tensor_names() == std::vector<std::string>{"ok"});
}
