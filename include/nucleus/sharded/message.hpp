// What one shard of a vocabulary-split row tells the others in one round of sharded sampling
// (nucleus/sharded/sampler.hpp), and its byte form for a transport (MPI, NCCL, sockets).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/simd/targets.hpp"

namespace nucleus {

// One round's summary of one shard. Which fields a round fills is the sampler's business; the rest
// stay at their defaults. Keys are rank keys (simd/scalar.hpp: logit descending, then id ascending)
// with global token ids, best first.
struct shard_message {
  std::uint32_t round = 0;          // which round this answers (shard_sampler::step refuses another round's)
  float max = -detail::inf();       // the largest candidate logit; later: the drawn token's logit
  float raw_max = -detail::inf();   // the same for the raw row (logprobs); later: the token's raw logit
  std::int32_t token = -1;          // the token this shard drew, or -1
  std::uint64_t count = 0;          // candidates, or tokens ranked above the drawn one
  std::uint64_t raw_count = 0;      // the same in the raw row
  std::uint64_t truncated = 0;      // 1: this shard had more candidates than the keys it sent
  detail::wsum mass = 0;            // exact sum of its candidates' weights
  detail::wsum raw_mass = 0;        // exact sum of its raw weights at T = 1
  std::vector<std::uint64_t> keys;  // its best candidates (or a top-p bin's members)
  std::vector<std::uint64_t> raw_keys;  // its best raw tokens (top-n logprobs)
  std::vector<detail::wsum> hist;       // top-p's mass per bin, bins [0, hist.size())
  std::vector<std::byte> row;           // the gather fallback: its slice's logits, as stored

  // Resets the fields and keeps the vectors' capacity (no allocation once warm).
  void clear(std::uint32_t r) noexcept {
    round = r;
    max = raw_max = -detail::inf();
    token = -1;
    count = raw_count = truncated = 0;
    mass = raw_mass = 0;
    keys.clear();
    raw_keys.clear();
    hist.clear();
    row.clear();
  }

  // Bytes on the wire: the fixed part plus the vectors.
  std::size_t wire_size() const noexcept {
    return fixed_bytes + 8 * (keys.size() + raw_keys.size()) + 16 * hist.size() + row.size();
  }
  static constexpr std::size_t fixed_bytes = 4 * 4 + 3 * 8 + 2 * 16 + 4 * 8;  // fields + 4 lengths

  // Appends the byte form to out (native byte order: shards of one job share an architecture).
  void encode(std::vector<std::byte>& out) const {
    const std::size_t at = out.size();
    out.resize(at + wire_size());
    std::byte* p = out.data() + at;
    auto put = [&p](const void* src, std::size_t n) {
      if (n) std::memcpy(p, src, n);
      p += n;
    };
    const std::uint64_t lens[4] = {keys.size(), raw_keys.size(), hist.size(), row.size()};
    put(&round, 4);
    put(&max, 4);
    put(&raw_max, 4);
    put(&token, 4);
    put(&count, 8);
    put(&raw_count, 8);
    put(&truncated, 8);
    put(&mass, 16);
    put(&raw_mass, 16);
    put(lens, sizeof lens);
    put(keys.data(), 8 * keys.size());
    put(raw_keys.data(), 8 * raw_keys.size());
    put(hist.data(), 16 * hist.size());
    put(row.data(), row.size());
  }

  // Reads one message from the front of `in`; returns the bytes it used. A malformed buffer (short,
  // or lengths past its end or past `max_bytes`) throws std::invalid_argument naming the field.
  std::size_t decode(std::span<const std::byte> in, std::size_t max_bytes = std::size_t{1} << 31) {
    std::size_t at = 0;
    auto get = [&](void* dst, std::size_t n, const char* field) {
      if (n > in.size() - at)
        throw std::invalid_argument(std::string("nucleus::shard_message: ") + field +
                                    " runs past the buffer");
      if (n) std::memcpy(dst, in.data() + at, n);
      at += n;
    };
    std::uint64_t lens[4];
    get(&round, 4, "round");
    get(&max, 4, "max");
    get(&raw_max, 4, "raw_max");
    get(&token, 4, "token");
    get(&count, 8, "count");
    get(&raw_count, 8, "raw_count");
    get(&truncated, 8, "truncated");
    get(&mass, 16, "mass");
    get(&raw_mass, 16, "raw_mass");
    get(lens, sizeof lens, "lengths");
    const char* names[4] = {"keys", "raw_keys", "hist", "row"};
    const std::size_t unit[4] = {8, 8, 16, 1};
    std::size_t need = 0;  // the lengths together, checked before anything is allocated
    for (int i = 0; i < 4; ++i) {
      if (lens[i] > max_bytes / unit[i] || lens[i] * unit[i] > in.size() - at - need)
        throw std::invalid_argument(std::string("nucleus::shard_message: ") + names[i] + " length " +
                                    std::to_string(lens[i]) + " runs past the buffer");
      need += lens[i] * unit[i];
    }
    keys.resize(lens[0]);
    raw_keys.resize(lens[1]);
    hist.resize(lens[2]);
    row.resize(lens[3]);
    get(keys.data(), 8 * lens[0], "keys");
    get(raw_keys.data(), 8 * lens[1], "raw_keys");
    get(hist.data(), 16 * lens[2], "hist");
    get(row.data(), lens[3], "row");
    return at;
  }
};

// Where a message belongs when one buffer carries many (a batch's round over MPI): its row in the
// batch and its shard's place in the row.
struct shard_tag {
  std::uint64_t row = 0;
  std::uint64_t shard = 0;
};

// Appends `m` to `out` behind its tag.
inline void encode_tagged(std::vector<std::byte>& out, shard_tag tag, const shard_message& m) {
  const std::uint64_t t[2] = {tag.row, tag.shard};
  const std::size_t at = out.size();
  out.resize(at + sizeof t);
  std::memcpy(out.data() + at, t, sizeof t);
  m.encode(out);
}

// Decodes every tagged message in `in`, in order, each into `slot(tag)` (a shard_message&). A cut
// or malformed buffer throws std::invalid_argument; the messages before it are decoded.
template <class Slot>
void decode_tagged(std::span<const std::byte> in, Slot&& slot, std::size_t max_bytes = std::size_t{1} << 31) {
  while (!in.empty()) {
    std::uint64_t t[2];
    if (in.size() < sizeof t)
      throw std::invalid_argument("nucleus::shard_message: a message's tag runs past the buffer");
    std::memcpy(t, in.data(), sizeof t);
    in = in.subspan(sizeof t);
    shard_message& m = slot(shard_tag{t[0], t[1]});
    in = in.subspan(m.decode(in, max_bytes));
  }
}

}  // namespace nucleus
