// DRY's sequence breakers from strings, as llama.cpp derives them from its vocabulary.
// Every token whose text contains the string breaks by itself; a token whose text ends in a proper
// prefix of the string is the head of a breaker whose tail is the rest of the string, tokenized. The
// engine layer takes the result as sampling_params::dry_sequence_breakers (token sequences, head first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nucleus/model/tokenizer.hpp"

namespace nucleus::model {

inline constexpr std::size_t dry_breaker_max_chars = 40;  // longer strings are cut (llama.cpp's limit)
inline constexpr std::size_t dry_breaker_max_tail = 20;   // tail tokens kept per head (llama.cpp's limit)

// One pass over the vocabulary per string: O(V * token length). Empty strings are skipped; a tail
// that is not valid UTF-8 (the string split inside a character) cannot be tokenized and is skipped.
inline std::vector<std::vector<std::int32_t>> dry_sequence_breakers(const tokenizer& t,
                                                                    std::span<const std::string> strings) {
  std::vector<std::vector<std::int32_t>> out;
  const std::size_t bos = t.encode("", false).size();  // 1 if encode adds BOS: not part of a tail
  for (std::string str : strings) {
    if (str.empty()) continue;
    if (str.size() > dry_breaker_max_chars) str.resize(dry_breaker_max_chars);
    const std::size_t first = out.size();
    for (std::int32_t id = 0; id < t.vocab_size(); ++id) {
      const std::string word = t.token_text(id);
      if (word.find(str) != std::string::npos) {
        out.push_back({id});
        continue;
      }
      // Each place the word's tail starts the string: the rest of the string follows as the tail.
      for (std::size_t pos = word.find(str[0]); pos != std::string::npos; pos = word.find(str[0], pos + 1)) {
        const std::size_t have = word.size() - pos;  // < str.size(): the word does not contain str
        if (std::string_view(word).substr(pos) != std::string_view(str).substr(0, have)) continue;
        std::vector<std::int32_t> tail;
        try {
          tail = t.encode(std::string_view(str).substr(have), false);
        } catch (const std::invalid_argument&) {
          continue;
        }
        std::vector<std::int32_t> seq{id};
        for (std::size_t i = bos; i < tail.size() && i - bos < dry_breaker_max_tail; ++i)
          seq.push_back(tail[i]);
        bool seen = false;
        for (std::size_t j = first; j < out.size() && !seen; ++j) seen = out[j] == seq;
        if (!seen) out.push_back(std::move(seq));
      }
    }
  }
  return out;
}

}  // namespace nucleus::model
