// Byte-level BPE (GPT-2 style) as llama.cpp tokenizes it, for GGUF vocabularies such as SmolLM2's.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nucleus/model/tokenizer_unicode.hpp"

namespace nucleus::model {

// What a GGUF's tokenizer.ggml.* metadata holds.
struct tokenizer_data {
  std::vector<std::string> tokens;        // tokenizer.ggml.tokens
  std::vector<std::string> merges;        // tokenizer.ggml.merges ("a b" strings)
  std::vector<std::int32_t> token_types;  // tokenizer.ggml.token_type (may be empty: all normal)
  std::string pre;                        // tokenizer.ggml.pre (e.g. "smollm")
  std::int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false;  // tokenizer.ggml.add_bos_token
};

namespace detail {

// GGUF token types (llama.cpp's llama_token_type).
enum class token_type : std::int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest move to U+0100 onwards.
constexpr std::array<std::uint32_t, 256> make_byte_to_cpt() {
  std::array<std::uint32_t, 256> map{};
  std::uint32_t next = 256;
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    map[b] = printable ? b : next++;
  }
  return map;
}
inline constexpr std::array<std::uint32_t, 256> byte_to_cpt = make_byte_to_cpt();

// The byte a code point of a byte-level token stands for, or -1.
constexpr int cpt_to_byte(std::uint32_t cpt) {
  if (cpt < 256 && byte_to_cpt[cpt] == cpt) return static_cast<int>(cpt);
  if (cpt >= 256 && cpt < 256 + 68) {
    for (int b = 0; b < 256; ++b)
      if (byte_to_cpt[b] == cpt) return b;
  }
  return -1;
}

inline void append_utf8(std::string& out, std::uint32_t cpt) {
  if (cpt < 0x80) {
    out += static_cast<char>(cpt);
  } else if (cpt < 0x800) {
    out += static_cast<char>(0xc0 | (cpt >> 6));
    out += static_cast<char>(0x80 | (cpt & 0x3f));
  } else if (cpt < 0x10000) {
    out += static_cast<char>(0xe0 | (cpt >> 12));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cpt & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cpt >> 18));
    out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cpt & 0x3f));
  }
}

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, surrogates or
// code points above U+10FFFF), or 0.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  return n;
}

inline void validate_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      throw std::invalid_argument("tokenizer::encode: invalid UTF-8 at byte offset " + std::to_string(i));
    }
    i += n;
  }
}

// The code point of one well-formed UTF-8 sequence.
inline std::uint32_t decode_one(std::string_view seq) {
  const auto c = static_cast<unsigned char>(seq[0]);
  std::uint32_t cpt = seq.size() == 1   ? c
                      : seq.size() == 2 ? (c & 0x1f)
                      : seq.size() == 3 ? (c & 0x0f)
                                        : (c & 0x07);
  for (std::size_t k = 1; k < seq.size(); ++k) cpt = (cpt << 6) | (static_cast<unsigned char>(seq[k]) & 0x3f);
  return cpt;
}

// Decodes already validated UTF-8, recording where each code point starts (plus the end).
inline void decode_utf8(std::string_view s, std::vector<std::uint32_t>& cpts,
                        std::vector<std::uint32_t>& starts) {
  cpts.clear();
  starts.clear();
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    cpts.push_back(n == 1 ? c : decode_one(s.substr(i, n)));
    starts.push_back(static_cast<std::uint32_t>(i));
    i += n;
  }
  starts.push_back(static_cast<std::uint32_t>(s.size()));
}

// Merge rules by (left id, right id): open addressing with linear probing, because the lookup is
// the BPE loop's hot spot and std::unordered_map's node chasing doubled its cost.
class pair_table {
 public:
  struct rule {
    std::int32_t rank, result;
  };

  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, slot{empty, {}});
  }

  // Keeps the first value stored under a key.
  void try_emplace(std::uint64_t key, rule v) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = hash(key) & mask();; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == empty) {
        slots_[i] = {key, v};
        ++size_;
        return;
      }
    }
  }

  const rule* find(std::uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = hash(key) & mask();; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == empty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t empty = ~std::uint64_t{0};  // ids are never -1, so no key is this
  struct slot {
    std::uint64_t key;
    rule value;
  };
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  std::size_t mask() const { return slots_.size() - 1; }
  void grow() {
    std::vector<slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : 2 * old.size(), slot{empty, {}});
    size_ = 0;
    for (const slot& s : old)
      if (s.key != empty) try_emplace(s.key, s.value);
  }
  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

}  // namespace detail

class tokenizer {
 public:
  explicit tokenizer(tokenizer_data data) : data_(std::move(data)) {
    validate_and_index();
    build_merges();
    build_pieces();
  }

  // Token ids of UTF-8 text, with BOS first when the vocabulary asks for it. parse_special: text that
  // spells a control token (e.g. "<|im_start|>") becomes that token; user-defined tokens always do.
  std::vector<std::int32_t> encode(std::string_view utf8, bool parse_special = true) const {
    if (utf8.size() > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("tokenizer::encode: input of 4 GiB or more");  // offsets are 32-bit
    }
    detail::validate_utf8(utf8);
    std::vector<std::int32_t> out;
    if (data_.add_bos && data_.bos >= 0) out.push_back(data_.bos);
    scratch s;
    for (const fragment& f : split_special(utf8, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        encode_text(utf8.substr(f.begin, f.size), out, s);
      }
    }
    return out;
  }

  std::string decode(std::span<const std::int32_t> ids) const {
    std::string out;
    for (std::int32_t id : ids) out += piece(id);
    return out;
  }

  // The bytes one token stands for (may be an incomplete UTF-8 sequence: stream, then join).
  std::string token_text(std::int32_t id) const { return piece(id); }

  std::int32_t vocab_size() const { return static_cast<std::int32_t>(data_.tokens.size()); }
  std::int32_t bos() const { return data_.bos; }
  std::int32_t eos() const { return data_.eos; }

  // The id of a token by its vocabulary spelling ("Ġthe", "<|im_end|>").
  std::optional<std::int32_t> find(std::string_view token) const {
    auto it = token_to_id_.find(token);
    if (it == token_to_id_.end()) return std::nullopt;
    return it->second;
  }

 private:
  // Which regex sequence tokenizer.ggml.pre names (llama-vocab.cpp).
  enum class pre_split {
    gpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    digits_gpt2,  // \p{N} first (every digit alone), then the GPT-2 regex within each piece
  };

  struct fragment {
    std::size_t begin, size;
    std::int32_t token;  // -1: raw text still to tokenize
  };

  struct symbol {
    std::int32_t id, prev, next;
    std::uint32_t size;  // bytes; 0 once merged into its left neighbour
  };

  struct bigram {
    std::int32_t rank, left, right, left_id, right_id, result;
  };

  struct scratch {
    std::vector<std::uint32_t> cpts, starts;
    std::vector<detail::cpt_class> classes;
    std::vector<symbol> symbols;
    std::vector<bigram> heap;
  };

  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

  static pre_split parse_pre(const std::string& pre) {
    static constexpr std::string_view gpt2[] = {"gpt2", "mpt", "olmo", "jais", "trillion", "granite-docling"};
    static constexpr std::string_view digits[] = {"smollm",    "starcoder", "refact", "command-r",
                                                  "codeshell", "exaone",    "minerva"};
    if (std::find(std::begin(gpt2), std::end(gpt2), pre) != std::end(gpt2)) return pre_split::gpt2;
    if (std::find(std::begin(digits), std::end(digits), pre) != std::end(digits))
      return pre_split::digits_gpt2;
    std::string supported;
    for (auto p : gpt2) supported.append(p).append(", ");
    for (auto p : digits) supported.append(p).append(", ");
    supported.resize(supported.size() - 2);
    throw std::invalid_argument("tokenizer: unsupported tokenizer.ggml.pre '" + pre +
                                "' (supported: " + supported + ")");
  }

  void validate_and_index() {
    const std::size_t n = data_.tokens.size();
    if (n == 0) throw std::invalid_argument("tokenizer: tokenizer_data.tokens is empty");
    if (n >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 2)) {
      throw std::invalid_argument("tokenizer: vocabulary of " + std::to_string(n) + " tokens is too large");
    }
    if (!data_.token_types.empty() && data_.token_types.size() != n) {
      throw std::invalid_argument("tokenizer: " + std::to_string(data_.token_types.size()) +
                                  " token types for " + std::to_string(n) + " tokens");
    }
    for (std::size_t i = 0; i < data_.token_types.size(); ++i) {
      if (data_.token_types[i] < 0 || data_.token_types[i] > 6) {
        throw std::invalid_argument("tokenizer: token " + std::to_string(i) + " has unknown type " +
                                    std::to_string(data_.token_types[i]));
      }
    }
    const auto check_id = [&](std::int32_t id, const char* what) {
      if (id < -1 || id >= static_cast<std::int32_t>(n)) {
        throw std::invalid_argument(std::string("tokenizer: ") + what + " id " + std::to_string(id) +
                                    " outside the vocabulary of " + std::to_string(n));
      }
    };
    check_id(data_.bos, "bos");
    check_id(data_.eos, "eos");
    check_id(data_.unk, "unk");
    check_id(data_.pad, "pad");
    if (data_.add_bos && data_.bos < 0)
      throw std::invalid_argument("tokenizer: add_bos is set but bos is -1");
    pre_ = parse_pre(data_.pre);

    token_to_id_.reserve(n);
    // A repeated spelling maps to its last id, as in llama.cpp.
    for (std::size_t i = 0; i < n; ++i) token_to_id_[data_.tokens[i]] = static_cast<std::int32_t>(i);

    for (std::size_t i = 0; i < n; ++i) {
      const auto t = type(static_cast<std::int32_t>(i));
      const bool special = t == detail::token_type::control || t == detail::token_type::unknown ||
                           t == detail::token_type::user_defined;
      if (special && !data_.tokens[i].empty()) special_by_length_.push_back(static_cast<std::int32_t>(i));
    }
    // Longest first, as llama.cpp matches them (ties by id, for a stable order).
    std::stable_sort(
        special_by_length_.begin(), special_by_length_.end(),
        [&](std::int32_t a, std::int32_t b) { return data_.tokens[a].size() > data_.tokens[b].size(); });
  }

  void build_merges() {
    const auto n = static_cast<std::int32_t>(data_.tokens.size());
    std::vector<std::pair<std::string_view, std::string_view>> parts(data_.merges.size());
    for (std::size_t i = 0; i < data_.merges.size(); ++i) {
      const std::string& m = data_.merges[i];
      const std::size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (space == std::string::npos || space + 1 == m.size()) {
        throw std::invalid_argument("tokenizer: merge " + std::to_string(i) + " '" + m +
                                    "' is not \"left right\"");
      }
      parts[i] = {std::string_view(m).substr(0, space), std::string_view(m).substr(space + 1)};
    }
    // A merge may yield a string the vocabulary lacks; it still takes part in later merges, so it
    // gets an id past the vocabulary (emitted as its bytes if it survives).
    std::unordered_map<std::string, std::int32_t, detail::string_hash, std::equal_to<>> extra;
    // Some vocabularies lack a few byte symbols (SmolLM2 has no U+0004, no 0xF1 lead byte, ...). Such a
    // byte still forms a symbol that merges may name, but on its own it is dropped, as in llama.cpp.
    for (int b = 0; b < 256; ++b) {
      std::string text;
      detail::append_utf8(text, detail::byte_to_cpt[b]);
      if (auto it = token_to_id_.find(text); it != token_to_id_.end()) {
        byte_token_[b] = it->second;
      } else if (b == ' ') {
        throw std::invalid_argument(
            "tokenizer: not a byte-level BPE vocabulary: no token 'Ġ' for the space byte");
      } else {
        byte_token_[b] = n + static_cast<std::int32_t>(extra.size());
        extra.emplace(std::move(text), byte_token_[b]);
      }
    }
    const auto lookup = [&](std::string_view s) -> std::int32_t {
      if (auto it = token_to_id_.find(s); it != token_to_id_.end()) return it->second;
      if (auto it = extra.find(s); it != extra.end()) return it->second;
      return -1;
    };
    std::vector<std::int32_t> results(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      std::string joined = std::string(parts[i].first) + std::string(parts[i].second);
      std::int32_t id = lookup(joined);
      if (id < 0) {
        id = n + static_cast<std::int32_t>(extra.size());
        extra.emplace(std::move(joined), id);
      }
      results[i] = id;
    }
    merges_.reserve(parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::int32_t left = lookup(parts[i].first), right = lookup(parts[i].second);
      if (left < 0 || right < 0) continue;  // no symbol can ever spell it
      merges_.try_emplace(pair_key(left, right), {static_cast<std::int32_t>(i), results[i]});
    }
    data_.merges = {};  // all in merges_ now
  }

  static int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  void build_pieces() {
    pieces_.resize(data_.tokens.size());
    for (std::size_t i = 0; i < data_.tokens.size(); ++i) {
      const std::string& text = data_.tokens[i];
      switch (type(static_cast<std::int32_t>(i))) {
        case detail::token_type::unknown:
        case detail::token_type::control:
        case detail::token_type::user_defined:
          pieces_[i] = text;
          break;
        case detail::token_type::unused:
          break;
        case detail::token_type::byte:
          if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
            const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
            if (hi < 0 || lo < 0)
              throw std::invalid_argument("tokenizer: byte token " + std::to_string(i) + " '" + text +
                                          "' is not <0xHH>");
            pieces_[i] = static_cast<char>(hi * 16 + lo);
            break;
          }
          [[fallthrough]];
        case detail::token_type::undefined:
        case detail::token_type::normal:
          pieces_[i] = byte_decode(text);
          break;
      }
    }
  }

  // Undoes the byte-to-unicode mapping; a code point outside it is kept as its UTF-8.
  static std::string byte_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      std::size_t n = detail::utf8_sequence_length(text, i);
      if (n == 0) {  // not UTF-8: keep the byte as it is
        out += text[i++];
        continue;
      }
      const int b = detail::cpt_to_byte(detail::decode_one(text.substr(i, n)));
      if (b >= 0) {
        out += static_cast<char>(b);
      } else {
        out.append(text.substr(i, n));
      }
      i += n;
    }
    return out;
  }

  detail::token_type type(std::int32_t id) const {
    if (data_.token_types.empty()) return detail::token_type::normal;
    return static_cast<detail::token_type>(data_.token_types[id]);
  }

  const std::string& piece(std::int32_t id) const {
    if (id < 0 || id >= vocab_size()) {
      throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " outside [0, " +
                              std::to_string(vocab_size()) + ")");
    }
    return pieces_[id];
  }

  // llama.cpp's tokenizer_st_partition: each special token in turn, longest first, cuts every raw
  // fragment at each of its occurrences.
  std::vector<fragment> split_special(std::string_view text, bool parse_special) const {
    if (text.empty()) return {};
    std::vector<fragment> frags{{0, text.size(), -1}}, next;
    for (std::int32_t id : special_by_length_) {
      if (!parse_special && type(id) != detail::token_type::user_defined) continue;
      const std::string& spelling = data_.tokens[id];
      if (text.find(spelling) == std::string_view::npos) continue;
      next.clear();
      for (const fragment& f : frags) {
        if (f.token >= 0) {
          next.push_back(f);
          continue;
        }
        const std::string_view raw = text.substr(f.begin, f.size);
        std::size_t pos = 0;
        for (std::size_t hit; (hit = raw.find(spelling, pos)) != std::string_view::npos;) {
          if (hit > pos) next.push_back({f.begin + pos, hit - pos, -1});
          next.push_back({0, 0, id});
          pos = hit + spelling.size();
        }
        if (pos < raw.size()) next.push_back({f.begin + pos, raw.size() - pos, -1});
      }
      frags.swap(next);
    }
    return frags;
  }

  void encode_text(std::string_view text, std::vector<std::int32_t>& out, scratch& s) const {
    detail::decode_utf8(text, s.cpts, s.starts);
    s.classes.resize(s.cpts.size());
    for (std::size_t i = 0; i < s.cpts.size(); ++i) s.classes[i] = detail::classify(s.cpts[i]);
    const auto word = [&](std::size_t a, std::size_t b) {
      encode_word(text.substr(s.starts[a], s.starts[b] - s.starts[a]), out, s);
    };
    if (pre_ == pre_split::gpt2) {
      split_gpt2(s, 0, s.cpts.size(), word);
      return;
    }
    // \p{N}: each number code point is a piece of its own, and so is each run between them.
    for (std::size_t a = 0; a < s.cpts.size();) {
      std::size_t b = a + 1;
      if (s.classes[a] != detail::cpt_class::number) {
        while (b < s.cpts.size() && s.classes[b] != detail::cpt_class::number) ++b;
      }
      split_gpt2(s, a, b, word);
      a = b;
    }
  }

  // The GPT-2 regex over code points [begin, end), as llama.cpp's unicode_regex_split_custom_gpt2
  // hand-codes it (nothing looks past the piece's ends).
  template <class Emit>
  static void split_gpt2(const scratch& s, std::size_t begin, std::size_t end, Emit&& emit) {
    using detail::cpt_class;
    constexpr auto none = static_cast<cpt_class>(0xff);  // past the piece: no class matches
    const auto cls = [&](std::size_t p) { return p < end ? s.classes[p] : none; };
    for (std::size_t pos = begin; pos < end;) {
      const std::uint32_t c = s.cpts[pos];
      if (c == '\'' && pos + 1 < end) {
        const std::uint32_t c1 = s.cpts[pos + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
          emit(pos, pos + 2);
          pos += 2;
          continue;
        }
        if (pos + 2 < end) {
          const std::uint32_t c2 = s.cpts[pos + 2];
          if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
            emit(pos, pos + 3);
            pos += 3;
            continue;
          }
        }
      }
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
      const cpt_class k = c == ' ' ? cls(pos + 1) : s.classes[pos];
      if (k == cpt_class::letter || k == cpt_class::number || k == cpt_class::other) {
        std::size_t q = pos + (c == ' ' ? 1 : 0);
        while (cls(q) == k) ++q;
        emit(pos, q);
        pos = q;
        continue;
      }
      std::size_t q = pos;
      while (cls(q) == cpt_class::space) ++q;
      if (q - pos > 1 && q < end) {  // `\s+(?!\S)`: leave the last space to the word after it
        emit(pos, q - 1);
        pos = q - 1;
      } else if (q > pos) {  // `\s+`
        emit(pos, q);
        pos = q;
      } else {
        emit(pos, pos + 1);
        ++pos;
      }
    }
  }

  // BPE over one pre-token: repeatedly merge the adjacent pair of lowest rank (leftmost on ties),
  // with a heap of candidate pairs, so a long word costs O(n log n).
  void encode_word(std::string_view word, std::vector<std::int32_t>& out, scratch& s) const {
    const auto n = static_cast<std::int32_t>(word.size());
    const auto emit_byte = [&](char c) {
      const std::int32_t id = byte_token_[static_cast<unsigned char>(c)];
      if (id < vocab_size()) out.push_back(id);
    };
    if (n == 1) {
      emit_byte(word[0]);
      return;
    }
    auto& sym = s.symbols;
    auto& heap = s.heap;
    sym.resize(word.size());
    heap.clear();
    for (std::int32_t i = 0; i < n; ++i) {
      sym[i] = {byte_token_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1};
    }
    const auto later = [](const bigram& a, const bigram& b) {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    };
    const auto consider = [&](std::int32_t left, std::int32_t right) {
      if (left < 0 || right < 0) return;
      const auto* rule = merges_.find(pair_key(sym[left].id, sym[right].id));
      if (rule == nullptr) return;
      heap.push_back({rule->rank, left, right, sym[left].id, sym[right].id, rule->result});
      std::push_heap(heap.begin(), heap.end(), later);
    };
    for (std::int32_t i = 1; i < n; ++i) consider(i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const bigram b = heap.back();
      heap.pop_back();
      symbol& l = sym[b.left];
      symbol& r = sym[b.right];
      // Stale: one side has merged since the pair was queued.
      if (l.size == 0 || r.size == 0 || l.next != b.right || l.id != b.left_id || r.id != b.right_id)
        continue;
      l.id = b.result;
      l.size += r.size;
      r.size = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = b.left;
      consider(l.prev, b.left);
      consider(b.left, l.next);
    }
    for (std::int32_t i = 0; i >= 0; i = sym[i].next) {
      if (sym[i].id < vocab_size()) {
        out.push_back(sym[i].id);
      } else {  // a symbol the vocabulary lacks: fall back to its bytes
        for (std::uint32_t k = 0; k < sym[i].size; ++k) emit_byte(word[i + k]);
      }
    }
  }

  tokenizer_data data_;
  pre_split pre_ = pre_split::gpt2;
  std::unordered_map<std::string, std::int32_t, detail::string_hash, std::equal_to<>> token_to_id_;
  std::array<std::int32_t, 256> byte_token_{};
  detail::pair_table merges_;
  std::vector<std::int32_t> special_by_length_;
  std::vector<std::string> pieces_;  // decoded bytes of each token
};

// The SmolLM2-Instruct chat template (ChatML), as the GGUF's tokenizer.chat_template writes it: a
// default system message when the first message is not one, then <|im_start|>role\ncontent<|im_end|>\n.
inline std::string chatml(std::span<const std::pair<std::string, std::string>> messages,
                          bool add_generation_prompt = true) {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& [role, content] = messages[i];
    if (i == 0 && role != "system") {
      out +=
          "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
          "Face<|im_end|>\n";
    }
    out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace nucleus::model
