// The server's pieces without HTTP: stop strings and UTF-8 held back while streaming, the chat
// template against the model's own ChatML, and request parsing's errors naming their parameter.
#include <catch2/catch.hpp>
#include <nucleus/model/tokenizer.hpp>
#include <random>
#include <string>
#include <vector>

#include "../../tools/server/api.hpp"
#include "../../tools/server/chat.hpp"
#include "../../tools/server/scheduler.hpp"

namespace srv = nucleus::server;

namespace {

// Feeds `pieces` one at a time; returns the released text and whether (and after which piece) it stopped.
std::pair<std::string, int> run(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  srv::stop_matcher m(std::move(stops));
  std::string out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    bool stopped = false;
    out += m.push(pieces[i], stopped);
    if (stopped) return {out, static_cast<int>(i)};
  }
  return {out + m.flush(), -1};
}

}  // namespace

TEST_CASE("stop strings end the text before them, wherever the token boundaries fall", "[server]") {
  CHECK(run({"\n\n"}, {"a", "b\n", "\nc"}) == std::pair<std::string, int>{"ab", 2});
  CHECK(run({"END"}, {"xE", "N", "D", "y"}) == std::pair<std::string, int>{"x", 2});
  CHECK(run({"END"}, {"xE", "N", "o"}) ==
        std::pair<std::string, int>{"xENo", -1});                           // a false start is released
  CHECK(run({"ab", "b"}, {"xab"}) == std::pair<std::string, int>{"x", 0});  // the earliest stop wins
  CHECK(run({}, {"a", "b"}) == std::pair<std::string, int>{"ab", -1});

  // Against brute force: generation stops at the first piece after which the text holds a stop
  // string (as vLLM checks after every token), and the text ends before the earliest one in it.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    for (int s = 0; s < 1 + static_cast<int>(rng() % 3); ++s) {
      std::string t;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) t += static_cast<char>('a' + rng() % 3);
      stops.push_back(t);
    }
    std::vector<std::string> pieces;
    std::string full;
    std::size_t cut = std::string::npos;
    for (int p = 0; p < 8; ++p) {
      std::string piece;
      for (int k = 0; k < static_cast<int>(rng() % 3); ++k) piece += static_cast<char>('a' + rng() % 4);
      pieces.push_back(piece);
      if (cut != std::string::npos) continue;
      full += piece;
      for (const std::string& s : stops) cut = std::min(cut, full.find(s));
    }
    const auto [text, stopped] = run(stops, pieces);
    INFO("trial " << trial);
    CHECK(text == full.substr(0, cut));
    CHECK((stopped >= 0) == (cut != std::string::npos));
  }
}

TEST_CASE("streamed text never splits a UTF-8 character", "[server]") {
  srv::stop_matcher m({});
  bool stopped = false;
  CHECK(m.push("a\xe2", stopped) == "a");  // the lead byte of a 3-byte character waits
  CHECK(m.push("\x82", stopped).empty());
  CHECK(m.push("\xac"
               "b",
               stopped) ==
        "\xe2\x82\xac"
        "b");
  CHECK(m.push("\xf0\x9f", stopped).empty());
  CHECK(m.flush() == "\xf0\x9f");  // at the end, whatever is left goes out as it is
}

TEST_CASE("the chat template renders as the model's ChatML", "[server]") {
  const std::string smollm2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
      "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
      "Face<|im_end|>\n' "
      "}}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% "
      "endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  const srv::chat_template t(smollm2);
  REQUIRE(t.supported());
  const std::vector<srv::chat_message> user = {{"user", "hi"}, {"assistant", "hello"}, {"user", "more"}};
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"user", "hi"}, {"assistant", "hello"}, {"user", "more"}};
  CHECK(t.render(user) == nucleus::model::chatml(pairs, true));
  const std::vector<srv::chat_message> sys = {{"system", "be brief"}, {"user", "hi"}};
  const std::vector<std::pair<std::string, std::string>> sys_pairs = {{"system", "be brief"}, {"user", "hi"}};
  CHECK(t.render(sys) == nucleus::model::chatml(sys_pairs, true));
  CHECK_FALSE(srv::chat_template(std::string("{{ bos_token }}[INST] {{ m }} [/INST]")).supported());
  CHECK(srv::chat_template(std::nullopt).render(sys).rfind("<|im_start|>system\nbe brief", 0) == 0);
}

TEST_CASE("request errors name their parameter", "[server]") {
  auto param_of = [](std::string_view body, srv::endpoint e = srv::endpoint::completions) {
    try {
      srv::parse_request(body, e);
    } catch (const srv::api_error& err) {
      return err.param;
    }
    return std::string("<accepted>");
  };
  CHECK(param_of(R"({"prompt": "x", "temperature": true})") == "temperature");
  CHECK(param_of(R"({"prompt": "x", "top_k": 1e30})") == "top_k");
  CHECK(param_of(R"({"prompt": "x", "seed": 1.5})") == "seed");
  CHECK(param_of(R"({"prompt": [1, -2]})") == "prompt[1]");
  CHECK(param_of(R"({"prompt": "x", "nucleus": {"dry_sequence_breakers": [1]}})") ==
        "nucleus.dry_sequence_breakers[0]");
  CHECK(param_of(R"({"messages": [{"role": "user", "content": "x", "tool": 1}]})", srv::endpoint::chat) ==
        "messages[0].tool");
  CHECK(param_of(R"({"prompt": "x", "temperature": 0.5, "seed": 18446744073709551615})") == "seed");
  CHECK(param_of(R"({"prompt": "x", "temperature": 0.5, "seed": -1})") == "<accepted>");
  // Found by the fuzzer: a number past double's range is nlohmann's out_of_range, not a parse_error.
  CHECK(param_of(R"({"prompt": "x", "temperature": 8e999})").empty());
  CHECK(param_of("{\"prompt\": \"x\", \"top_p\": 1" + std::string(400, '0') + "}").empty());
  const srv::generation_request r =
      srv::parse_request(R"({"prompt": "x", "logprobs": 3, "seed": 9})", srv::endpoint::completions);
  CHECK(r.params.logprobs == 3);
  CHECK(r.params.seed == 9u);
  try {
    nucleus::sampler bad(nucleus::sampling_params{.top_n_sigma = std::numeric_limits<float>::infinity()});
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(srv::sampler_error(e).param == "nucleus.top_n_sigma");
  }
  // min_keep rides in the extension; the sampler's own check names it there.
  CHECK(srv::parse_request(R"({"prompt": "x", "nucleus": {"min_keep": 5}})", srv::endpoint::completions)
            .params.min_keep == 5);
  CHECK(param_of(R"({"prompt": "x", "nucleus": {"min_keep": 1.5}})") == "nucleus.min_keep");
  try {
    nucleus::sampler bad(nucleus::sampling_params{.min_keep = 0});
    FAIL("accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(srv::sampler_error(e).param == "nucleus.min_keep");
  }
}

TEST_CASE("every knob of the table round-trips through a request, and a bad one is refused by name",
          "[server][knobs]") {
  std::size_t numbers = 0;
  for (const nucleus::knob& k : nucleus::knobs) {
    if (k.place == nucleus::json_place::none) continue;
    INFO(k.name);
    const bool top = k.place == nucleus::json_place::top;
    const std::string param = top ? std::string(k.name) : std::string("nucleus.") + k.name;
    auto body = [&](const std::string& value) {
      const std::string field = "\"" + std::string(k.name) + "\": " + value;
      return std::string(R"({"prompt": "x", )") + (top ? field : "\"nucleus\": {" + field + "}") + "}";
    };
    auto refused_as = [&](const std::string& value) {
      try {
        srv::parse_request(body(value), srv::endpoint::completions);
      } catch (const srv::api_error& err) {
        return err.param;
      }
      return std::string("<accepted>");
    };
    CHECK(refused_as("true") == param);  // no knob is a boolean
    if (!k.number()) continue;
    const srv::generation_request r =
        srv::parse_request(body(nlohmann::json(k.probe).dump()), srv::endpoint::completions);
    nucleus::sampling_params want;
    k.set(want, k.probe);
    CHECK(k.get(r.params) == k.get(want));
    // The rest of the params stay at their defaults.
    for (const nucleus::knob& other : nucleus::knobs)
      if (other.number() && &other != &k) CHECK(other.get(r.params) == other.get(nucleus::sampling_params{}));
    const double below = k.lo_open ? k.lo : k.lo - 1;
    if (std::isfinite(k.lo) && below >= std::numeric_limits<int>::min())
      CHECK(refused_as(nlohmann::json(below).dump()) == param);
    // The sampler's own check of the same field maps to the same parameter name.
    if (std::isfinite(k.lo)) {
      nucleus::sampling_params bad;
      k.set(bad, below);
      try {
        nucleus::sampler s(bad);
        FAIL("accepted");
      } catch (const std::invalid_argument& e) {
        CHECK(srv::sampler_error(e).param == param);
      }
    }
    ++numbers;
  }
  CHECK(numbers >= 25);
  // The kinds with their own shapes.
  const srv::generation_request r = srv::parse_request(
      R"({"prompt": "x", "seed": 7, "logprobs": 2, "logit_bias": {"5": -1.5}, "nucleus": {"logprobs_mode": "processed",
          "allowed_token_ids": [1, 2], "banned_token_ids": [3], "dry_sequence_breakers": ["\n"]}})",
      srv::endpoint::completions);
  CHECK(r.seed == 7u);
  CHECK(r.logprobs == 2);
  CHECK(r.params.logprobs_mode == nucleus::logprob_mode::processed);
  CHECK(r.params.allowed_token_ids == std::vector<std::int32_t>{1, 2});
  CHECK(r.params.banned_token_ids == std::vector<std::int32_t>{3});
  CHECK(r.dry_breakers == std::vector<std::string>{"\n"});
  REQUIRE(r.params.logit_bias.size() == 1);
  CHECK(r.params.logit_bias[0].token == 5);
  CHECK(r.params.logit_bias[0].bias == -1.5f);
}
