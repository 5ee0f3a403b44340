// The tokenizer on a hand-built byte-level vocabulary: no model needed.
#include <catch2/catch.hpp>

#include <nucleus/model/tokenizer.hpp>

#include "byte_symbols.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using nucleus::model::tokenizer;
using nucleus::model::tokenizer_data;
using ids = std::vector<std::int32_t>;
using nucleus_test::byte_symbol;

// Ids 0..255 are the bytes; the extra tokens follow in order.
tokenizer_data tiny(std::vector<std::string> extra, std::vector<std::string> merges,
                    std::string pre = "smollm") {
  tokenizer_data d;
  for (int b = 0; b < 256; ++b) d.tokens.push_back(byte_symbol(b));
  for (auto& t : extra) d.tokens.push_back(std::move(t));
  d.merges = std::move(merges);
  d.pre = std::move(pre);
  return d;
}

std::int32_t byte_id(unsigned char b) {
  return b;
}

}  // namespace

TEST_CASE("tokenizer: the byte symbols are GPT-2's") {
  CHECK(byte_symbol(' ') == "\xc4\xa0");   // Ġ
  CHECK(byte_symbol('\n') == "\xc4\x8a");  // Ċ
  CHECK(byte_symbol('a') == "a");
  CHECK(byte_symbol(0xad) == "\xc5\x83");  // the soft hyphen is remapped (U+0143)
  CHECK(byte_symbol(0xff) == "\xc3\xbf");
}

TEST_CASE("tokenizer: merges apply in rank order, leftmost first on ties") {
  const tokenizer bc_first(tiny({"ab", "bc"}, {"b c", "a b"}));
  CHECK(bc_first.encode("abc") == ids{byte_id('a'), 257});
  const tokenizer ab_first(tiny({"ab", "bc"}, {"a b", "b c"}));
  CHECK(ab_first.encode("abc") == ids{256, byte_id('c')});

  // A merge that builds on an earlier one.
  const tokenizer chain(tiny({"ab", "abc"}, {"a b", "ab c"}));
  CHECK(chain.encode("abcab") == ids{257, 256});

  // "aaa": both pairs have the same rank, the left one wins.
  const tokenizer aa(tiny({"aa"}, {"a a"}));
  CHECK(aa.encode("aaa") == ids{256, byte_id('a')});
  CHECK(aa.encode("aaaa") == ids{256, 256});
}

TEST_CASE("tokenizer: a long word is not quadratic and merges consistently") {
  const tokenizer aa(tiny({"aa", "aaaa"}, {"a a", "aa aa"}));
  const std::string word(200001, 'a');
  const auto out = aa.encode(word);
  REQUIRE(out.size() == 50000 + 1);
  CHECK(out.front() == 257);
  CHECK(out.back() == byte_id('a'));
  CHECK(aa.decode(out) == word);
}

TEST_CASE("tokenizer: characters without merges fall back to their bytes") {
  const tokenizer t(tiny({"ab"}, {"a b"}));
  CHECK(t.encode("\xc3\xa9") == ids{0xc3, 0xa9});  // é
  const std::string emoji = "\xf0\x9f\x98\x80";    // 😀
  CHECK(t.encode(emoji) == ids{0xf0, 0x9f, 0x98, 0x80});
  CHECK(t.decode(t.encode("ab\xc3\xa9" + emoji)) == "ab\xc3\xa9" + emoji);
  CHECK(t.token_text(0xc3) == "\xc3");  // one byte of a character: streaming joins them
  CHECK(t.token_text(256) == "ab");
}

TEST_CASE("tokenizer: a byte the vocabulary lacks is dropped, as llama.cpp does") {
  // SmolLM2 has no token for byte 0x04 either; a merge may still name the byte's symbol.
  auto d = tiny({byte_symbol(4) + "!"}, {byte_symbol(4) + " !"});
  d.tokens[4] = "unused";
  const tokenizer t(d);
  CHECK(t.encode(std::string("a\x04") + "b") == ids{'a', 'b'});
  CHECK(t.encode("\x04") == ids{});
  CHECK(t.encode("\x04!") == ids{256});
}

TEST_CASE("tokenizer: invalid UTF-8 is rejected with its byte offset") {
  const tokenizer t(tiny({}, {}));
  const auto offset_of = [&](const std::string& s) -> std::string {
    try {
      t.encode(s);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK_THAT(offset_of("ab\xffzz"), Catch::Contains("byte offset 2"));
  CHECK_THAT(offset_of("abc\xe2\x82"), Catch::Contains("byte offset 3"));       // truncated
  CHECK_THAT(offset_of("\xc0\xaf"), Catch::Contains("byte offset 0"));          // overlong '/'
  CHECK_THAT(offset_of("x\xed\xa0\x80"), Catch::Contains("byte offset 1"));     // surrogate
  CHECK_THAT(offset_of("\xf4\x90\x80\x80"), Catch::Contains("byte offset 0"));  // above U+10FFFF
  CHECK_THAT(offset_of("ok \x80"), Catch::Contains("byte offset 3"));           // stray continuation
  CHECK(offset_of("\xe2\x82\xac \xf0\x9f\x98\x80") == "accepted");
}

TEST_CASE("tokenizer: empty input") {
  const tokenizer t(tiny({}, {}));
  CHECK(t.encode("").empty());
  CHECK(t.decode({}).empty());
}

TEST_CASE("tokenizer: pre-tokenization keeps words, spaces and digits apart") {
  // "Ġb" exists, so a space joins the word after it, and a run of spaces leaves its last one there.
  const tokenizer t(tiny({"\xc4\xa0"
                          "b",
                          "12", "\xc4\xa0\xc4\xa0"},
                         {"\xc4\xa0 b", "1 2", "\xc4\xa0 \xc4\xa0"}));
  CHECK(t.encode("a b") == ids{'a', 256});
  CHECK(t.encode("a   b") == ids{'a', 258, 256});  // "a", "  ", " b"
  CHECK(t.encode("a  ") == ids{'a', 258});         // trailing spaces stay together
  // smollm splits every digit before the GPT-2 regex; "gpt2" keeps runs of digits.
  CHECK(t.encode("x12") == ids{'x', '1', '2'});
  const tokenizer g(tiny({"12"}, {"1 2"}, "gpt2"));
  CHECK(g.encode("x12") == ids{'x', 256});
  CHECK(g.encode("x 12") == ids{'x', ' ', 256});  // no " 12" merge: space, then the number
  // Contractions split off; a letter run does not swallow punctuation.
  CHECK(t.encode("it's!") == ids{'i', 't', '\'', 's', '!'});
}

TEST_CASE("tokenizer: special tokens") {
  auto d = tiny({"<|im_start|>", "<|im_end|>", "<tool>"}, {});
  d.token_types.assign(d.tokens.size(), 1);
  d.token_types[256] = 3;  // control
  d.token_types[257] = 3;
  d.token_types[258] = 4;  // user-defined: split out even without parse_special
  d.bos = 256;
  const tokenizer t(d);
  CHECK(t.encode("x<|im_start|>y<|im_end|>") == ids{'x', 256, 'y', 257});
  CHECK(t.encode("<|im_start|><|im_start|>") == ids{256, 256});
  CHECK(t.encode("x<|im_start|>y", false) ==
        ids{'x', '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>', 'y'});
  CHECK(t.encode("a<tool>b", false) == ids{'a', 258, 'b'});
  CHECK(t.decode(t.encode("x<|im_start|>y")) == "x<|im_start|>y");
  CHECK(t.find("<|im_end|>") == 257);
  CHECK(t.find("\xc4\xa0") == ' ');
  CHECK_FALSE(t.find("nope").has_value());
  CHECK(t.bos() == 256);
  CHECK(t.eos() == -1);
  CHECK(t.vocab_size() == 259);

  d.add_bos = true;
  const tokenizer with_bos(d);
  CHECK(with_bos.encode("x") == ids{256, 'x'});
  CHECK(with_bos.encode("") == ids{256});
}

TEST_CASE("tokenizer: bad vocabularies are refused with a reason") {
  const auto reason = [](tokenizer_data d) -> std::string {
    try {
      tokenizer t(std::move(d));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(reason(tiny({}, {})) == "accepted");
  CHECK_THAT(reason(tokenizer_data{}), Catch::Contains("empty"));
  auto no_space = tiny({}, {});
  no_space.tokens[' '] = "space";
  CHECK_THAT(reason(no_space), Catch::Contains("no token 'Ġ' for the space byte"));
  CHECK_THAT(reason(tiny({}, {}, "llama3")), Catch::Contains("unsupported tokenizer.ggml.pre 'llama3'"));
  CHECK_THAT(reason(tiny({}, {"ab"})), Catch::Contains("merge 0 'ab'"));
  auto types = tiny({}, {});
  types.token_types = {1, 1};
  CHECK_THAT(reason(types), Catch::Contains("2 token types for 256 tokens"));
  types.token_types.assign(256, 9);
  CHECK_THAT(reason(types), Catch::Contains("unknown type 9"));
  auto bos = tiny({}, {});
  bos.bos = 256;
  CHECK_THAT(reason(bos), Catch::Contains("bos id 256"));
  bos.bos = -1;
  bos.add_bos = true;
  CHECK_THAT(reason(bos), Catch::Contains("add_bos"));
  // Byte tokens spell their byte as <0xHH>: nothing else is read as one (found by tests/fuzz).
  for (const char* bad : {"<0xZZ>", "<0x-1>", "<0x 1>"}) {
    auto bytes = tiny({bad}, {});
    bytes.token_types.assign(257, 1);
    bytes.token_types[256] = 6;  // byte
    CHECK_THAT(reason(bytes), Catch::Contains("byte token 256 '" + std::string(bad) + "' is not <0xHH>"));
  }
  auto good = tiny({"<0x4a>"}, {});
  good.token_types.assign(257, 1);
  good.token_types[256] = 6;
  CHECK(reason(good) == "accepted");
  CHECK(tokenizer(good).decode(ids{256}) == "J");
}

TEST_CASE("tokenizer: decode rejects ids outside the vocabulary") {
  const tokenizer t(tiny({}, {}));
  const ids bad{256};
  CHECK_THROWS_AS(t.decode(bad), std::out_of_range);
  CHECK_THROWS_AS(t.token_text(-1), std::out_of_range);
}

TEST_CASE("chatml: SmolLM2-Instruct's template") {
  using msgs = std::vector<std::pair<std::string, std::string>>;
  const msgs user{{"user", "Hi"}};
  CHECK(nucleus::model::chatml(user) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const msgs sys{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}};
  CHECK(nucleus::model::chatml(sys, false) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello<|im_end|>\n");
  CHECK(nucleus::model::chatml(msgs{}) == "<|im_start|>assistant\n");
}
