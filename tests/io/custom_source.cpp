// The example from docs/weights.md, compiled and run: a weight source over an engine's own buffers.
#include <nucleus/io/weight_source.hpp>

#include <catch2/catch.hpp>

// --- docs/weights.md example begins ---
#include <map>
#include <nucleus/io/weight_source.hpp>

namespace io = nucleus::io;

// Weights an engine already holds, as f32 buffers keyed by name.
class engine_weights {
 public:
  void add(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& values) {
    io::tensor_view t{name, std::move(shape), io::dtype::f32, std::as_bytes(std::span(values))};
    tensors_.insert_or_assign(std::move(name), std::move(t));
  }
  void set(std::string key, io::metadata_value v) {
    metadata_.insert_or_assign(std::move(key), std::move(v));
  }

  const io::tensor_view* find_tensor(std::string_view n) const {
    auto it = tensors_.find(n);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const io::metadata_value* find_metadata(std::string_view k) const {
    auto it = metadata_.find(k);
    return it == metadata_.end() ? nullptr : &it->second;
  }
  std::string_view path() const { return "engine"; }
  std::vector<std::string> tensor_names() const {
    std::vector<std::string> names;
    for (const auto& [n, t] : tensors_) names.push_back(n);
    return names;
  }

 private:
  std::map<std::string, io::tensor_view, std::less<>> tensors_;
  std::map<std::string, io::metadata_value, std::less<>> metadata_;
};
static_assert(io::weight_source<engine_weights>);
// --- docs/weights.md example ends ---

namespace {

// What a consumer such as the forward pass does with any source.
template <io::weight_source S>
std::vector<float> load_norm(const S& src) {
  const auto layers = io::require_int(src, "llama.block_count");
  const io::tensor_view& t =
      io::require_tensor(src, "blk." + std::to_string(layers - 1) + ".attn_norm.weight");
  return io::dequantize(t);
}

}  // namespace

TEST_CASE("a user-defined weight source plugs in", "[io][weight_source]") {
  const std::vector<float> norm = {1.0f, 0.5f};
  engine_weights w;
  w.add("blk.1.attn_norm.weight", {2}, norm);
  w.set("llama.block_count", std::uint32_t{2});
  CHECK(load_norm(w) == norm);
  CHECK(w.tensor_names() == std::vector<std::string>{"blk.1.attn_norm.weight"});
  w.set("llama.block_count", std::string("two"));
  CHECK_THROWS_WITH(load_norm(w),
                    Catch::Matchers::Contains("engine") && Catch::Matchers::Contains("'llama.block_count'"));
  w.set("llama.block_count", std::uint32_t{3});
  CHECK_THROWS_AS(load_norm(w), io::format_error);
}
