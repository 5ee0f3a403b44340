// A shard's message and the tagged framing the MPI layer sends (nucleus/sharded/message.hpp), in
// process: every field survives its byte form, and a cut, forged or corrupted buffer is an
// std::invalid_argument, never a read past its end or an allocation it does not pay for. Each
// hostile buffer is its own allocation of exactly its size, so that under ASan (scripts/test's
// sanitizer pass runs this binary) a read one byte past it is a failure.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nucleus/sharded/message.hpp>
#include <random>
#include <vector>

namespace nc = nucleus;

namespace {

nc::shard_message full_message(std::uint32_t seed) {
  nc::shard_message m;
  m.clear(seed);
  m.max = 1.5f + static_cast<float>(seed);
  m.raw_max = -2.25f;
  m.token = static_cast<std::int32_t>(40 + seed);
  m.count = 1000 + seed;
  m.raw_count = 2000;
  m.truncated = 1;
  m.mass = (nc::detail::wsum{1} << 100) + seed;
  m.raw_mass = (nc::detail::wsum{3} << 90) + 5;
  for (std::uint32_t i = 0; i < 3 + seed % 4; ++i) m.keys.push_back(0x9000000000000000ull + i);
  m.raw_keys = {7, 6};
  for (std::uint32_t i = 0; i < seed % 3; ++i) m.hist.push_back((nc::detail::wsum{i} << 70) + 1);
  for (std::uint32_t i = 0; i < 5 + seed % 7; ++i) m.row.push_back(static_cast<std::byte>(i * 31 + seed));
  return m;
}

void check_same(const nc::shard_message& a, const nc::shard_message& b) {
  CHECK(a.round == b.round);
  CHECK(std::bit_cast<std::uint32_t>(a.max) == std::bit_cast<std::uint32_t>(b.max));
  CHECK(std::bit_cast<std::uint32_t>(a.raw_max) == std::bit_cast<std::uint32_t>(b.raw_max));
  CHECK(a.token == b.token);
  CHECK(a.count == b.count);
  CHECK(a.raw_count == b.raw_count);
  CHECK(a.truncated == b.truncated);
  CHECK(a.mass == b.mass);
  CHECK(a.raw_mass == b.raw_mass);
  CHECK(a.keys == b.keys);
  CHECK(a.raw_keys == b.raw_keys);
  CHECK(a.hist == b.hist);
  CHECK(a.row == b.row);
}

// A copy of bytes [0, n) in an allocation of exactly n bytes.
std::vector<std::byte> exact(const std::vector<std::byte>& bytes, std::size_t n) {
  return std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
}

// Where the four lengths (keys, raw_keys, hist, row) sit in a message's byte form.
constexpr std::size_t length_at = nc::shard_message::fixed_bytes - 4 * 8;

// A buffer of three tagged messages, as one rank's contribution to a round.
std::vector<std::byte> three_tagged(std::vector<nc::shard_message>& sent) {
  std::vector<std::byte> bytes;
  for (std::uint32_t i = 0; i < 3; ++i) {
    sent.push_back(full_message(i));
    nc::encode_tagged(bytes, {i, 10 + i}, sent.back());
  }
  return bytes;
}

}  // namespace

TEST_CASE("shard_message: every field survives its byte form, into a used message too",
          "[sharded][message]") {
  for (std::uint32_t seed = 0; seed < 9; ++seed) {
    nc::shard_message m = full_message(seed);
    if (seed == 8) m.clear(9);  // no vectors: the fixed part alone
    std::vector<std::byte> bytes;
    m.encode(bytes);
    REQUIRE(bytes.size() == m.wire_size());
    CHECK((seed < 8 || bytes.size() == nc::shard_message::fixed_bytes));
    nc::shard_message back = full_message(seed + 5);  // longer vectors than the message's: resized
    back.keys.resize(50);
    CHECK(back.decode(exact(bytes, bytes.size())) == bytes.size());
    check_same(back, m);
  }
}

TEST_CASE("shard_message: tagged messages in one buffer come back in order, each with its tag",
          "[sharded][message]") {
  std::vector<nc::shard_message> sent;
  const std::vector<std::byte> bytes = three_tagged(sent);
  std::vector<nc::shard_message> got(3);
  std::vector<nc::shard_tag> tags;
  nc::decode_tagged(exact(bytes, bytes.size()), [&](nc::shard_tag t) -> nc::shard_message& {
    tags.push_back(t);
    return got[tags.size() - 1];
  });
  REQUIRE(tags.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(tags[i].row == i);
    CHECK(tags[i].shard == 10 + i);
    check_same(got[i], sent[i]);
  }
  std::size_t calls = 0;  // an empty round: nothing to decode
  nc::decode_tagged(std::span<const std::byte>(), [&](nc::shard_tag) -> nc::shard_message& {
    ++calls;
    return got[0];
  });
  CHECK(calls == 0);
}

TEST_CASE("shard_message: a buffer cut anywhere is an error, never a read past its end",
          "[sharded][message]") {
  std::vector<nc::shard_message> sent;
  const std::vector<std::byte> bytes = three_tagged(sent);
  std::vector<std::size_t> ends;  // where each tagged message ends: a cut there is a whole buffer
  for (const nc::shard_message& m : sent)
    ends.push_back((ends.empty() ? 0 : ends.back()) + 16 + m.wire_size());
  REQUIRE(ends.back() == bytes.size());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::byte> cut = exact(bytes, n);
    nc::shard_message scratch;
    std::size_t decoded = 0;
    auto slot = [&](nc::shard_tag) -> nc::shard_message& {
      ++decoded;
      return scratch;
    };
    const bool whole = std::find(ends.begin(), ends.end(), n) != ends.end() || n == 0;
    INFO("cut at " << n << " of " << bytes.size());
    if (whole) {
      CHECK_NOTHROW(nc::decode_tagged(cut, slot));
    } else {
      CHECK_THROWS_AS(nc::decode_tagged(cut, slot), std::invalid_argument);
      // The first message alone, cut: the same error from shard_message::decode.
      if (n > 16 && n < ends[0]) {
        nc::shard_message m;
        CHECK_THROWS_AS(m.decode(std::span<const std::byte>(cut).subspan(16)), std::invalid_argument);
      }
    }
  }
  nc::shard_message m;
  CHECK_THROWS_WITH(
      nc::decode_tagged(exact(bytes, 9), [&](nc::shard_tag) -> nc::shard_message& { return m; }),
      Catch::Contains("tag"));
}

TEST_CASE("shard_message: forged lengths are refused before anything is allocated, naming the field",
          "[sharded][message]") {
  nc::shard_message m = full_message(4);
  m.row.resize(100);  // the largest field, for max_bytes below
  std::vector<std::byte> bytes;
  m.encode(bytes);
  const char* names[4] = {"keys", "raw_keys", "hist", "row"};
  const std::uint64_t unit[4] = {8, 8, 16, 1};
  constexpr std::uint64_t all = std::numeric_limits<std::uint64_t>::max();
  for (int field = 0; field < 4; ++field) {
    const std::uint64_t room = (bytes.size() - nc::shard_message::fixed_bytes) / unit[field];
    // One past what the buffer holds; lengths whose byte count wraps to a small number (2^61 keys
    // are 2^64 bytes, 0 once wrapped); the largest; one past max_bytes.
    std::vector<std::uint64_t> forgeries = {room + 1, std::uint64_t{1} << 61, all,
                                            (std::uint64_t{1} << 31) / unit[field] + 1};
    if (unit[field] > 1) forgeries.push_back(all / unit[field] + 1);
    for (std::uint64_t forged : forgeries) {
      std::vector<std::byte> f = bytes;
      std::memcpy(f.data() + length_at + 8 * field, &forged, 8);
      nc::shard_message back;
      INFO(names[field] << " length " << forged);
      CHECK_THROWS_WITH(back.decode(exact(f, f.size())),
                        Catch::Contains(std::string(names[field]) + " length"));
      CHECK(back.keys.capacity() <= 64);  // nothing was sized from the forged length
    }
  }
  // Each length within the buffer, but together past it: refused, however the bytes are shared.
  std::vector<std::byte> f = bytes;
  const std::uint64_t half = (bytes.size() - nc::shard_message::fixed_bytes) / 8;
  for (int field = 0; field < 2; ++field) std::memcpy(f.data() + length_at + 8 * field, &half, 8);
  nc::shard_message back;
  CHECK_THROWS_AS(back.decode(exact(f, f.size())), std::invalid_argument);
  // max_bytes holds a message the buffer does hold to a caller's bound.
  CHECK_THROWS_WITH(back.decode(exact(bytes, bytes.size()), m.row.size() - 1), Catch::Contains("row length"));
  CHECK(back.decode(exact(bytes, bytes.size()), m.row.size()) == bytes.size());
}

TEST_CASE("shard_message: corrupted and random buffers decode or are refused, nothing else",
          "[sharded][message]") {
  std::vector<nc::shard_message> sent;
  const std::vector<std::byte> bytes = three_tagged(sent);
  std::mt19937_64 rng(22);
  std::size_t refused = 0, decoded = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<std::byte> b;
    if (trial % 4 == 3) {  // random bytes of a random length
      b.resize(rng() % 300);
      for (std::byte& x : b) x = static_cast<std::byte>(rng());
    } else {  // the real buffer with a few bytes changed (lengths and tags among them) and maybe cut
      b = bytes;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) {
        const std::size_t at = rng() % b.size();
        b[at] = trial % 2 ? static_cast<std::byte>(rng()) : b[at] ^ static_cast<std::byte>(1u << (rng() % 8));
      }
      if (trial % 3 == 0) b = exact(b, rng() % (b.size() + 1));
    }
    std::vector<nc::shard_message> slots(4);
    std::vector<bool> used(4, false);
    try {
      nc::decode_tagged(b, [&](nc::shard_tag t) -> nc::shard_message& {
        used[t.row % 4] = true;
        return slots[t.row % 4];
      });
      ++decoded;
      for (std::size_t i = 0; i < 4; ++i) CHECK((!used[i] || 16 + slots[i].wire_size() <= b.size()));
    } catch (const std::invalid_argument&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
  CHECK(decoded > 0);
}
