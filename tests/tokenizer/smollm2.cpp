// SmolLM2-135M-Instruct's vocabulary against llama.cpp's recorded tokenization
// (tests/tokenizer/llama_cpp_tokens.json, written by record_llama_cpp.py).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <nucleus/model/dry_breakers.hpp>
#include <nucleus/model/tokenizer.hpp>

#include "byte_symbols.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using nucleus::model::tokenizer;
using nucleus::model::tokenizer_data;
using ids = std::vector<std::int32_t>;

constexpr int skip_code = 77;  // SKIP_RETURN_CODE in CMakeLists.txt

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

// The vocabulary the ctest fixture (dump_vocab.py) extracted; without the model there is none, and
// the whole binary reports a skip.
const tokenizer& smollm2() {
  static const tokenizer t = [] {
    const std::filesystem::path path = NUCLEUS_TOKENIZER_VOCAB_JSON;
    if (!std::filesystem::exists(path)) {
      std::printf("SKIP: %s not found (SmolLM2-135M-Instruct GGUF not installed?)\n", path.string().c_str());
      std::fflush(stdout);
      std::exit(skip_code);
    }
    const nlohmann::json j = read_json(path);
    tokenizer_data d;
    d.tokens = j.at("tokens").get<std::vector<std::string>>();
    d.merges = j.at("merges").get<std::vector<std::string>>();
    d.token_types = j.at("token_types").get<std::vector<std::int32_t>>();
    d.pre = j.at("pre").get<std::string>();
    d.bos = j.at("bos").get<std::int32_t>();
    d.eos = j.at("eos").get<std::int32_t>();
    d.unk = j.at("unk").get<std::int32_t>();
    d.pad = j.at("pad").get<std::int32_t>();
    d.add_bos = j.at("add_bos").get<bool>();
    return tokenizer(std::move(d));
  }();
  return t;
}

const nlohmann::json& recorded() {
  static const nlohmann::json j = read_json(NUCLEUS_TOKENIZER_RECORDED_JSON);
  return j;
}

// What decode(encode(text)) gives back: the text less the bytes the vocabulary has no symbol for
// (llama.cpp drops them; SmolLM2 lacks U+0004, U+0006, U+0013, U+0014, U+0016, U+001D, ...).
std::string representable(const tokenizer& t, const std::string& text) {
  std::string out;
  for (char c : text)
    if (t.find(nucleus_test::byte_symbol(static_cast<unsigned char>(c)))) out += c;
  return out;
}

std::string shown(const std::string& s) {
  return nlohmann::json(s).dump().substr(0, 120);
}

}  // namespace

TEST_CASE("smollm2: vocabulary") {
  const tokenizer& t = smollm2();
  CHECK(t.vocab_size() == 49152);
  CHECK(t.bos() == 1);
  CHECK(t.eos() == 2);
  CHECK(t.find("<|im_start|>") == 1);
  CHECK(t.find("<|im_end|>") == 2);
  CHECK(t.token_text(2) == "<|im_end|>");
  CHECK(t.token_text(*t.find("\xc4\xa0the")) == " the");
}

TEST_CASE("smollm2: encode matches llama.cpp on the recorded corpus") {
  const tokenizer& t = smollm2();
  const auto& cases = recorded().at("cases");
  REQUIRE(cases.size() >= 50);
  std::size_t match = 0, match_plain = 0, round_trip = 0;
  for (const auto& c : cases) {
    const auto text = c.at("text").get<std::string>();
    const auto want = c.at("ids").get<ids>();
    const auto want_plain = c.at("ids_no_special").get<ids>();
    INFO("text: " << shown(text));
    const ids got = t.encode(text, true);
    CHECK(got == want);
    match += got == want;
    const ids got_plain = t.encode(text, false);
    CHECK(got_plain == want_plain);
    match_plain += got_plain == want_plain;
    const std::string back = t.decode(got);
    CHECK(back == representable(t, text));
    round_trip += back == text;
  }
  std::printf(
      "llama.cpp agreement: %zu/%zu strings (parse_special), %zu/%zu (plain), %zu/%zu exact round trips\n",
      match, cases.size(), match_plain, cases.size(), round_trip, cases.size());
}

// docs/tokenizer.md: a byte the vocabulary has no symbol for is dropped by encode, as llama.cpp does
// (its BPE looks each byte up and skips those with no token). SmolLM2 has none for 0x04 or 0x1d.
TEST_CASE("smollm2: bytes with no token are dropped by encode, as llama.cpp drops them") {
  const tokenizer& t = smollm2();
  for (int b : {0x04, 0x1d}) {
    INFO("byte " << b);
    CHECK_FALSE(t.find(nucleus_test::byte_symbol(b)).has_value());
    CHECK(t.encode(std::string(1, static_cast<char>(b)), false).empty());
  }
  CHECK(t.find(nucleus_test::byte_symbol(0x1c)).has_value());  // its neighbour has one
  const std::string text =
      "a\x04"
      "b\x1d"
      "c \x04\x04\x1d!";  // split: \x04b would be one escape
  const ids got = t.encode(text, false);
  CHECK(t.decode(got) == "abc !");
  CHECK(t.decode(got) == representable(t, text));
  // The recorded llama.cpp case with 0x1d: the same ids, and the byte is gone from its decode too.
  bool seen = false;
  for (const auto& c : recorded().at("cases")) {
    const auto text_with = c.at("text").get<std::string>();
    if (text_with.find('\x1d') == std::string::npos) continue;
    seen = true;
    const ids want = c.at("ids_no_special").get<ids>();
    CHECK(t.encode(text_with, false) == want);
    CHECK(t.decode(want).find('\x1d') == std::string::npos);
  }
  CHECK(seen);
}

TEST_CASE("smollm2: chatml prompts match the template and llama.cpp's tokens") {
  const tokenizer& t = smollm2();
  for (const auto& chat : recorded().at("chats")) {
    std::vector<std::pair<std::string, std::string>> messages;
    for (const auto& m : chat.at("messages")) messages.emplace_back(m.at(0), m.at(1));
    const std::string prompt = nucleus::model::chatml(messages, chat.at("add_generation_prompt").get<bool>());
    CHECK(prompt == chat.at("prompt").get<std::string>());
    CHECK(t.encode(prompt) == chat.at("ids").get<ids>());
  }
}

TEST_CASE("smollm2: streaming token_text joins to decode") {
  const tokenizer& t = smollm2();
  const std::string text =
      "Streaming: caf\xc3\xa9 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 <|im_end|> "
      "\xe4\xb8\xad\xe6\x96\x87";
  std::string joined;
  for (std::int32_t id : t.encode(text)) joined += t.token_text(id);
  CHECK(joined == text);
}

// Speed is not measured here (tests do not time themselves); this pins that a multi-megabyte input
// encodes and round-trips.
TEST_CASE("smollm2: a 4 MB input round-trips") {
  const tokenizer& t = smollm2();
  std::string text;
  for (const auto& c : recorded().at("cases")) text += c.at("text").get<std::string>() + "\n";
  while (text.size() < (4u << 20)) text += text;
  const auto out = t.encode(text, false);
  CHECK(out.size() > text.size() / 16);
  CHECK(t.decode(out) == representable(t, text));
}

TEST_CASE("smollm2: DRY breakers from strings are the tokens llama.cpp's vocabulary scan finds") {
  // tests/peers/fixtures/llama_cpp.json lists, from libllama's own detokenization, every token below
  // id_limit whose text contains each breaker string.
  const nlohmann::json dry = read_json(NUCLEUS_PEER_FIXTURE)["dry_vocab"];
  const auto limit = dry["id_limit"].get<std::int32_t>();
  const tokenizer& t = smollm2();
  for (const auto& [str, want] : dry["single_token_breakers"].items()) {
    const std::vector<std::string> one{str};
    std::vector<std::int32_t> got;
    std::size_t heads = 0;
    for (const auto& seq : nucleus::model::dry_sequence_breakers(t, one)) {
      if (seq.size() == 1 && seq[0] < limit) got.push_back(seq[0]);
      heads += seq.size() > 1;
    }
    INFO("breaker \"" << str << "\"");
    CHECK(got == want.get<std::vector<std::int32_t>>());
    CHECK(heads == 0);  // one-character strings have no partial heads
  }
  // A longer string: heads whose text ends in its prefix carry the rest, tokenized.
  const std::vector<std::string> words{"assistant"};
  const auto seqs = nucleus::model::dry_sequence_breakers(t, words);
  std::size_t partial = 0;
  for (const auto& seq : seqs) {
    if (seq.size() == 1) {
      CHECK(t.token_text(seq[0]).find("assistant") != std::string::npos);
      continue;
    }
    ++partial;
    const std::string head = t.token_text(seq[0]);
    const std::string tail = t.decode(std::vector<std::int32_t>(seq.begin() + 1, seq.end()));
    // the head's text ends where the tail begins: together they spell the string
    CHECK((head + tail).size() >= std::string("assistant").size());
    CHECK((head + tail).substr(head.size() + tail.size() - 9) == "assistant");
  }
  CHECK(partial > 0);
}
