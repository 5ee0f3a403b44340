// log_softmax, top_logprobs and logprobs_of on a row split into shards: the whole row's bits, for
// every row kind (NaN, -inf, +inf, huge, ties), float and bf16, any cut.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nucleus/nucleus.hpp>
#include <nucleus/ops/logprobs_of.hpp>
#include <nucleus/sharded/ops.hpp>
#include <vector>

#include "reference/cases.hpp"
#include "reference/reference.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

template <class T>
void check_ops(std::span<const T> row, std::span<const std::size_t> cuts, std::size_t top_n) {
  const std::size_t p = cuts.size() - 1;
  std::vector<nc::shard_normalizer> shards(p);
  std::vector<nc::workspace> spaces(p);
  std::vector<nc::shard_message> inbox(p);
  for (std::size_t i = 0; i < p; ++i)
    shards[i].begin(row.subspan(cuts[i], cuts[i + 1] - cuts[i]), cuts[i], top_n, spaces[i]);
  std::size_t rounds = 0;
  while (!shards[0].done()) {
    for (std::size_t i = 0; i < p; ++i) inbox[i] = shards[i].outgoing();
    for (auto& s : shards) s.step(inbox);
    REQUIRE(++rounds <= 2);
  }
  // log_softmax: each shard writes its own part.
  std::vector<float> want(row.size()), got(row.size());
  const nc::status st = nc::log_softmax(row, std::span<float>(want));
  for (std::size_t i = 0; i < p; ++i)
    shards[i].log_softmax(row.subspan(cuts[i], cuts[i + 1] - cuts[i]),
                          std::span<float>(got).subspan(cuts[i], cuts[i + 1] - cuts[i]));
  CHECK(shards[p - 1].row_status() == st);
  std::size_t same = 0;
  for (std::size_t j = 0; j < row.size(); ++j) same += bits(got[j]) == bits(want[j]);
  CHECK(same == row.size());
  // top_logprobs: every shard holds the whole row's.
  nc::workspace ws(row.size());
  const auto want_top = nc::top_logprobs(row, top_n, ws);
  std::vector<nc::token_logprob> got_top(top_n);
  for (std::size_t i = 0; i < p; ++i) {
    const std::size_t c = shards[i].top(std::span<nc::token_logprob>(got_top));
    REQUIRE(c == want_top.size());
    for (std::size_t j = 0; j < c; ++j) {
      CHECK(got_top[j].token == want_top[j].token);
      CHECK(bits(got_top[j].logprob) == bits(want_top[j].logprob));
    }
  }
  // logprobs_of: each id from the shard that holds it.
  std::vector<std::int32_t> ids;
  for (std::size_t j = 0; j < std::min<std::size_t>(row.size(), 16); ++j)
    ids.push_back(static_cast<std::int32_t>((j * 7919) % row.size()));
  std::vector<float> want_lp(ids.size()), got_lp(ids.size(), 1.0f);
  nc::logprobs_of(row, std::span<const std::int32_t>(ids), std::span<float>(want_lp));
  std::size_t wrote = 0;
  for (std::size_t i = 0; i < p; ++i)
    wrote += shards[i].logprobs_of(row.subspan(cuts[i], cuts[i + 1] - cuts[i]), cuts[i],
                                   std::span<const std::int32_t>(ids), std::span<float>(got_lp));
  CHECK(wrote == ids.size());
  for (std::size_t j = 0; j < ids.size(); ++j) CHECK(bits(got_lp[j]) == bits(want_lp[j]));
}

}  // namespace

TEST_CASE("sharded ops: log_softmax, top_logprobs and logprobs_of equal the whole row's", "[sharded]") {
  for (std::size_t index = 0; index < 1500; ++index) {
    ref::rng g(0x4F5053ull + index);
    const std::size_t V = index % 300 == 5 ? 248320 : nucleus_cases::random_vocab(g, index);
    std::vector<float> row = ref::make_row(nucleus_cases::random_kind(g), V, g);
    const std::size_t shards = 1 + g.below(8);
    std::vector<std::size_t> cuts{0};
    for (std::size_t i = 1; i < shards; ++i) cuts.push_back(g.below(V + 1));
    std::sort(cuts.begin() + 1, cuts.end());
    cuts.push_back(V);
    const std::size_t top_n = g.below(9);
    INFO("case " << index << " V " << V << " shards " << shards << " top_n " << top_n);
    if (index % 3 == 0) {
      std::vector<nc::bf16> b(V);
      for (std::size_t j = 0; j < V; ++j) b[j] = nc::to_bf16(row[j]);
      check_ops<nc::bf16>(b, cuts, top_n);
    } else {
      check_ops<float>(row, cuts, top_n);
    }
  }
}
