// sampler_for(chain, seed): a compile-time chain whose stages sit in an engine's order maps to the
// sampler that draws its tokens bit for bit, so a chain can be sharded; any other chain is refused
// at construction, naming what does not fit.
#include <catch2/catch.hpp>

#include <nucleus/nucleus.hpp>
#include <nucleus/sharded/chain.hpp>
#include <nucleus/sharded/split.hpp>
#include <vector>

#include "reference/cases.hpp"
#include "reference/reference.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

// Knob values that are sometimes off (so the stage drops out of the mapping) and sometimes on.
struct knobs {
  ref::rng& g;
  float t() {
    return g.below(6) == 0 ? 1.0f : g.below(8) == 0 ? 0.0f : static_cast<float>(g.uniform(0.3, 1.8));
  }
  int k() { return g.below(2) ? 0 : static_cast<int>(1 + g.below(50)); }
  float p() { return g.below(2) ? 1.0f : static_cast<float>(g.uniform(0.2, 0.99)); }
  float m() { return g.below(2) ? 0.0f : static_cast<float>(g.uniform(0.01, 0.3)); }
  float rare(float on) { return g.below(4) == 0 ? on : 0.0f; }
  float typical() { return g.below(4) == 0 ? 0.8f : 1.0f; }
  float sigma() { return g.below(4) == 0 ? 1.5f : -1.0f; }
};

// The chain's draw against sampler_for's, whole and cut into random shards.
template <class C>
void check_chain(const C& chain, std::span<const float> row, std::uint64_t seed, ref::rng& g,
                 std::size_t& checked) {
  const nc::sampler s = nc::sampler_for(chain, seed);
  nc::workspace ws(row.size()), ws2(row.size());
  nc::split_sampler split(s, 4);
  for (std::uint64_t pos = 0; pos < 3; ++pos) {
    const nc::draw_key key{seed, pos, pos % 2};
    const nc::sample_result want = chain(row, ws, key);
    nc::row_request rq;
    rq.position = key.position;
    rq.stream = key.stream;
    const nc::row_result got = s.sample(row, ws2, rq);
    std::vector<std::size_t> cuts{0, g.below(row.size() + 1), g.below(row.size() + 1), row.size()};
    std::sort(cuts.begin(), cuts.end());
    const nc::row_result sharded = split.sample(row, std::span<const std::size_t>(cuts), rq);
    INFO("V " << row.size() << " order " << static_cast<int>(s.order()) << " position " << pos);
    CHECK(got.token == want.token);
    CHECK(got.status == want.status);
    CHECK(std::bit_cast<std::uint32_t>(got.logprob) == std::bit_cast<std::uint32_t>(want.logprob));
    CHECK(sharded == got);
    ++checked;
  }
}

}  // namespace

TEST_CASE("sampler_for: chains in each engine's order draw the sampler's tokens, whole and sharded",
          "[sharded][chain]") {
  std::size_t checked = 0;
  for (std::size_t i = 0; i < 400; ++i) {
    ref::rng g(0x434841494Eull + i);
    const std::size_t V = nucleus_cases::random_vocab(g, i) % 6000 + 1;
    const std::vector<float> row = ref::make_row(nucleus_cases::random_kind(g), V, g);
    knobs r{g};
    const std::uint64_t seed = g.next();
    switch (i % 4) {
      case 0:  // nucleus's order
        check_chain(nc::dynamic_temperature(r.t(), r.rare(0.4f), 1.0f) | nc::top_n_sigma(r.sigma()) |
                        nc::top_k(r.k()) | nc::typical(r.typical()) | nc::top_p(r.p()) | nc::min_p(r.m()) |
                        nc::epsilon_cutoff(r.rare(3e-4f)) | nc::eta_cutoff(r.rare(1e-3f)) |
                        nc::xtc(r.rare(0.6f), 0.1f) | nc::categorical(),
                    row, seed, g, checked);
        break;
      case 1:  // Hugging Face's
        check_chain(nc::temperature(r.t()) | nc::top_k(r.k(), nc::ties::keep) | nc::top_p(r.p()) |
                        nc::min_p(r.m()) | nc::typical(r.typical()) | nc::epsilon_cutoff(r.rare(3e-4f)) |
                        nc::eta_cutoff(r.rare(1e-3f)) | nc::categorical(),
                    row, seed, g, checked);
        break;
      case 2:  // llama.cpp's: the temperature last
        check_chain(nc::top_n_sigma(r.sigma()) | nc::top_k(r.k()) | nc::typical(r.typical()) |
                        nc::top_p(r.p()) | nc::min_p(r.m()) | nc::xtc(r.rare(0.6f), 0.1f) |
                        nc::temperature(r.t()) | nc::categorical(),
                    row, seed, g, checked);
        break;
      default:  // vLLM's: min-p before top-k
        check_chain(nc::temperature(r.t() == 0.0f ? 0.5f : r.t()) | nc::min_p(r.m()) |
                        nc::top_k(r.k(), nc::ties::keep) | nc::top_p(r.p()) | nc::categorical(),
                    row, seed, g, checked);
    }
  }
  CHECK(checked == 1200);
  // The short chains people write.
  ref::rng g(3);
  const std::vector<float> row = ref::make_row(ref::row_kind::peaky, 5000, g);
  check_chain(nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical(), row, 1, g, checked);
  check_chain(nc::top_k(40) | nc::top_p(0.9f) | nc::min_p(0.05f) | nc::temperature(0.8f) | nc::categorical(),
              row, 2, g, checked);
  check_chain(nc::min_p(0.1f) | nc::argmax(), row, 3, g, checked);
  check_chain(nc::temperature(0.0f) | nc::top_k(5) | nc::categorical(), row, 4, g, checked);
  check_chain(nc::categorical(), row, 5, g, checked);
}

TEST_CASE("sampler_for: a chain in no engine's order is refused, naming what does not fit",
          "[sharded][chain]") {
  // top-p before top-k: no engine cuts in that order.
  CHECK_THROWS_WITH(nc::sampler_for(nc::top_p(0.9f) | nc::top_k(40) | nc::categorical(), 1),
                    Catch::Contains("top_p, top_k") && Catch::Contains("no engine's order"));
  // Two temperatures (their product is no one knob).
  CHECK_THROWS_AS(nc::sampler_for(nc::temperature(0.5f) | nc::temperature(0.5f) | nc::categorical(), 1),
                  std::invalid_argument);
  // A per-stage min_keep.
  CHECK_THROWS_WITH(nc::sampler_for(nc::top_p(0.9f, 3) | nc::categorical(), 1), Catch::Contains("min_keep"));
  // top-k keeping ties before xtc: only the orders that break ties (nucleus, llama.cpp) have xtc.
  CHECK_THROWS_AS(nc::sampler_for(nc::top_k(10, nc::ties::keep) | nc::xtc(0.5f, 0.1f) | nc::categorical(), 1),
                  std::invalid_argument);
  // ... while the same knobs with ties broken map (to llama.cpp's order, say).
  CHECK_NOTHROW(nc::sampler_for(nc::top_k(10) | nc::xtc(0.5f, 0.1f) | nc::categorical(), 1));
}
