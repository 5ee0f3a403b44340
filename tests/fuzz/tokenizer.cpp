// libFuzzer harness: the tokenizer on arbitrary text and arbitrary ids. The vocabularies are built
// once: a small byte-level one with merges and special tokens under both pre-tokenizer families, and
// the real SmolLM2 vocabulary when $NUCLEUS_FUZZ_GGUF names its GGUF (scripts/find-model prints it).
//
// Input: a byte choosing the vocabulary and parse_special, a 2-byte length n, n bytes of text, then
// 2-byte ids for decode().
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nucleus/io/gguf.hpp>
#include <nucleus/model/gguf_tokenizer.hpp>
#include <nucleus/model/tokenizer.hpp>

#include "../tokenizer/byte_symbols.hpp"
#include "fuzz_input.hpp"

namespace {

namespace model = nucleus::model;
using nucleus_fuzz::check;

using nucleus_test::byte_symbol;

model::tokenizer_data small_vocabulary(std::string pre) {
  model::tokenizer_data d;
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byte_symbol(b));
  d.token_types.assign(256, 1);
  const std::string sp = byte_symbol(' '), nl = byte_symbol('\n');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {sp, "t"},  {sp + "t", "he"}, {"i", "n"},      {sp, "a"},
      {"e", "r"}, {"o", "n"}, {"1", "2"},       {"l", "l"},      {"ll", "o"},
      {sp, sp},   {nl, nl},   {"he", "llo"},    {sp + "a", "n"}, {"\xc3\xa9", "t"}};
  for (const auto& [a, b] : merges) {
    d.tokens.push_back(a + b);
    d.token_types.push_back(1);
    d.merges.push_back(a + " " + b);
  }
  const std::vector<std::pair<std::string, std::int32_t>> specials = {
      {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<tool>", 4},       {"<unk>", 2},
      {"<0x41>", 6},       {"<unused>", 5},   {"<|im_start|>x", 4}};
  for (const auto& [text, type] : specials) {
    d.tokens.push_back(text);
    d.token_types.push_back(type);
  }
  d.pre = std::move(pre);
  d.bos = 256 + static_cast<std::int32_t>(merges.size());
  d.eos = d.bos + 1;
  d.unk = d.bos + 3;
  return d;
}

struct vocabularies {
  std::vector<std::unique_ptr<model::tokenizer>> all;
  std::size_t small = 0;  // the first `small` hold every byte: decode(encode(s)) == s there
};

const vocabularies& tokenizers() {
  static const vocabularies v = [] {
    vocabularies v;
    for (const char* pre : {"smollm", "gpt2"}) {
      v.all.push_back(std::make_unique<model::tokenizer>(small_vocabulary(pre)));
      model::tokenizer_data with_bos = small_vocabulary(pre);
      with_bos.add_bos = true;
      v.all.push_back(std::make_unique<model::tokenizer>(std::move(with_bos)));
    }
    v.small = v.all.size();
    if (const char* path = std::getenv("NUCLEUS_FUZZ_GGUF"); path != nullptr && *path != '\0') {
      const auto f = nucleus::io::gguf_file::open(path);
      v.all.push_back(std::make_unique<model::tokenizer>(model::read_tokenizer_data(f)));
    }
    return v;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const vocabularies& v = tokenizers();
  nucleus_fuzz::input in(data, size);
  const std::uint8_t mode = in.byte();
  const std::size_t which = (mode >> 1) % v.all.size();
  const bool parse_special = (mode & 1) != 0;
  const model::tokenizer& tok = *v.all[which];
  const std::int32_t vocab = tok.vocab_size();

  const std::span<const std::uint8_t> raw = in.take(in.u16());
  const std::string_view text(reinterpret_cast<const char*>(raw.data()), raw.size());
  bool valid_utf8 = true;
  std::vector<std::int32_t> ids;
  try {
    ids = tok.encode(text, parse_special);
  } catch (const std::invalid_argument&) {
    valid_utf8 = false;  // not UTF-8: refused as a whole
  }
  for (std::int32_t id : ids) check(id >= 0 && id < vocab);
  if (valid_utf8) {
    const std::string back = tok.decode(ids);
    // Without special parsing every byte has a token in the small vocabularies, so nothing is lost.
    if (which < v.small && !parse_special) {
      const bool bos_first = which % 2 == 1;  // the add_bos variants
      check(!bos_first || (!ids.empty() && ids[0] == tok.bos()));
      check(back == (bos_first ? tok.token_text(tok.bos()) : std::string()) + std::string(text));
    }
  }

  std::vector<std::int32_t> arbitrary;
  bool in_range = true;
  while (in.remaining() >= 2) {
    const std::int32_t id =
        static_cast<std::int32_t>(in.u16() % (static_cast<std::uint32_t>(vocab) + 16)) - 8;
    in_range = in_range && id >= 0 && id < vocab;
    arbitrary.push_back(id);
  }
  try {
    std::size_t total = 0;
    for (std::int32_t id : arbitrary) total += tok.token_text(id).size();
    check(tok.decode(arbitrary).size() == total);
    check(in_range);
  } catch (const std::out_of_range&) {
    check(!in_range);
  }
  return 0;
}
