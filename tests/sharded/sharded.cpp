// Sharded sampling: a row split into any number of contiguous shards at any boundaries gives the
// engine sampler's result on the whole row, bit for bit — token, logprob, rank, top-n and status —
// for every order, knob, processor, dtype and row kind; and the same on a thread pool.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <nucleus/engine.hpp>
#include <nucleus/sharded/split.hpp>
#include <sstream>
#include <vector>

#include "reference/reference.hpp"
#include "sharded/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

using nucleus_sharded_cases::make_case;
using nucleus_sharded_cases::request_of;
using nucleus_sharded_cases::sharded_case;

template <class T>
void check_same(const nc::sampler& s, std::span<const T> row, const sharded_case& c, nc::split_sampler& split,
                std::size_t& paths_seen) {
  nc::workspace ws(row.size());
  nc::row_request rq = request_of(c), rq2 = rq;
  float mu = 2.0f * c.params.mirostat_tau, mu2 = mu;  // mirostat's state: one copy per side
  if (c.params.mirostat != 0) {
    rq.mirostat_mu = &mu;
    rq2.mirostat_mu = &mu2;
  }
  std::vector<nc::token_logprob> want_top(8), got_top(8);
  const nc::row_result want = s.sample(row, ws, rq, std::span<nc::token_logprob>(want_top));
  const nc::row_result got =
      split.sample(row, std::span<const std::size_t>(c.cuts), rq2, std::span<nc::token_logprob>(got_top));
  CHECK(std::bit_cast<std::uint32_t>(mu) == std::bit_cast<std::uint32_t>(mu2));
  INFO(c.describe() << " path " << static_cast<int>(split.route()));
  CHECK(got.token == want.token);
  CHECK(got.status == want.status);
  CHECK(got.rank == want.rank);
  CHECK(got.top_count == want.top_count);
  CHECK(std::bit_cast<std::uint32_t>(got.logprob) == std::bit_cast<std::uint32_t>(want.logprob));
  for (std::uint32_t i = 0; i < want.top_count && i < got.top_count; ++i) {
    CHECK(got_top[i].token == want_top[i].token);
    CHECK(std::bit_cast<std::uint32_t>(got_top[i].logprob) ==
          std::bit_cast<std::uint32_t>(want_top[i].logprob));
  }
  paths_seen |= std::size_t{1} << static_cast<int>(split.route());
}

}  // namespace

TEST_CASE("sharded: any cut gives the whole row's result, bit for bit", "[sharded]") {
  std::size_t paths = 0;
  constexpr std::size_t cases = 3000;
  for (std::size_t i = 0; i < cases; ++i) {
    const sharded_case c = make_case(i);
    const nc::sampler s(c.params, c.order);
    nc::split_sampler split(s, 8);
    if (i % 4 == 1) {  // bf16 rows
      std::vector<nc::bf16> b(c.row.size());
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = nc::to_bf16(c.row[j]);
      check_same<nc::bf16>(s, b, c, split, paths);
    } else {
      check_same<float>(s, c.row, c, split, paths);
    }
  }
  CHECK(paths == 0b11111);  // every path ran: gather, greedy, top_k, top_p, dense
}

TEST_CASE("sharded: top-p past the leader budget takes the histogram rounds", "[sharded]") {
  // A flat row: the nucleus holds most of the vocabulary, far past a budget of 16 leaders.
  ref::rng g(7);
  std::vector<float> row = ref::uniform_row(20000, g, -0.5, 0.5);
  nc::sampling_params p;
  p.top_p = 0.9f;
  p.seed = 11;
  p.logprobs = 3;
  p.logprobs_mode = nc::logprob_mode::processed;
  const nc::sampler s(p);
  nc::split_sampler split(s, 4, /*budget=*/16);
  nc::workspace ws(row.size());
  for (std::uint64_t pos = 0; pos < 50; ++pos) {
    nc::row_request rq;
    rq.position = pos;
    const std::size_t cuts[] = {0, 777, 10000, 10001, 20000};
    std::vector<nc::token_logprob> want_top(3), got_top(3);
    const nc::row_result want =
        s.sample(std::span<const float>(row), ws, rq, std::span<nc::token_logprob>(want_top));
    const nc::row_result got = split.sample(std::span<const float>(row), std::span<const std::size_t>(cuts),
                                            rq, std::span<nc::token_logprob>(got_top));
    CHECK(got == want);
    CHECK(got_top == want_top);
    CHECK(split.route() == nc::shard_sampler::path::top_p);
    CHECK(split.rounds() == 7);  // leaders, mass, histogram, edge bin, draw mass, token, rank
  }
}

TEST_CASE("sharded: the thread pool splits one row, same bits as one thread", "[sharded]") {
  nc::thread_pool pool(3);
  for (std::size_t i = 0; i < 300; ++i) {
    sharded_case c = make_case(10000 + i);
    const nc::sampler s(c.params, c.order);
    nc::split_sampler split(s, 3);
    nc::workspace ws(c.row.size());
    nc::row_request rq = request_of(c), rq2 = rq;
    float mu = 2.0f * c.params.mirostat_tau, mu2 = mu;
    if (c.params.mirostat != 0) {
      rq.mirostat_mu = &mu;
      rq2.mirostat_mu = &mu2;
    }
    std::vector<nc::token_logprob> want_top(8), got_top(8);
    const nc::row_result want =
        s.sample(std::span<const float>(c.row), ws, rq, std::span<nc::token_logprob>(want_top));
    INFO(c.describe());
    CHECK(split.sample(std::span<const float>(c.row), rq2, std::span<nc::token_logprob>(got_top), pool) ==
          want);
    CHECK(std::equal(want_top.begin(), want_top.begin() + want.top_count, got_top.begin()));
    CHECK(mu == mu2);
  }
}

TEST_CASE("sharded: a message survives its byte form; a cut or forged one is an error naming the field",
          "[sharded]") {
  nc::shard_message m;
  m.clear(3);
  m.max = 1.5f;
  m.token = 42;
  m.mass = (nc::detail::wsum{1} << 100) + 7;
  m.keys = {9, 8, 7};
  m.hist = {1, 2};
  m.row = {std::byte{1}, std::byte{2}, std::byte{3}};
  std::vector<std::byte> bytes;
  m.encode(bytes);
  CHECK(bytes.size() == m.wire_size());
  nc::shard_message back;
  CHECK(back.decode(bytes) == bytes.size());
  CHECK(back.round == 3);
  CHECK(back.max == 1.5f);
  CHECK(back.token == 42);
  CHECK(back.mass == m.mass);
  CHECK(back.keys == m.keys);
  CHECK(back.hist == m.hist);
  CHECK(back.row == m.row);
  // Cut short anywhere: an error, never a read past the end.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    nc::shard_message cut;
    CHECK_THROWS_AS(cut.decode(std::span<const std::byte>(bytes.data(), n)), std::invalid_argument);
  }
  // A forged length (2^60 keys) is refused before anything is allocated, naming the field.
  std::vector<std::byte> forged = bytes;
  const std::uint64_t huge = std::uint64_t{1} << 60;
  std::memcpy(forged.data() + 72, &huge, 8);  // the keys' length, after the fixed fields
  nc::shard_message f;
  CHECK_THROWS_WITH(f.decode(forged), Catch::Contains("keys length"));
}

TEST_CASE("sharded: a request's own seed draws what a sampler built with that seed draws",
          "[sharded][seed]") {
  std::size_t moved = 0;
  for (std::size_t i = 0; i < 200; ++i) {
    sharded_case c = make_case(30000 + i);
    const nc::sampler shared(c.params, c.order);
    nc::sampling_params q = c.params;
    q.seed = ~c.params.seed;
    const nc::sampler built(q, c.order);
    nc::split_sampler split(shared, 8);
    nc::workspace ws(c.row.size());
    nc::row_request plain = request_of(c), with_seed = plain, again = plain;
    with_seed.seed = q.seed;
    float mu = 2.0f * c.params.mirostat_tau, mu2 = mu, mu3 = mu;
    if (c.params.mirostat != 0) {
      plain.mirostat_mu = &mu;
      with_seed.mirostat_mu = &mu2;
      again.mirostat_mu = &mu3;
    }
    std::vector<nc::token_logprob> want_top(8), got_top(8);
    const std::span<const float> x(c.row);
    const nc::row_result want = built.sample(x, ws, plain, std::span<nc::token_logprob>(want_top));
    INFO(c.describe());
    CHECK(split.sample(x, std::span<const std::size_t>(c.cuts), with_seed,
                       std::span<nc::token_logprob>(got_top)) == want);
    CHECK(std::equal(want_top.begin(), want_top.begin() + want.top_count, got_top.begin()));
    if (!(shared.sample(x, ws, again) == want)) ++moved;  // the seed is not ignored
  }
  CHECK(moved > 50);
}
