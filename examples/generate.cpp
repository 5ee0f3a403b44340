// Prompt -> tokens -> forward pass -> sampler chain -> text, streamed as it is produced.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nucleus/nucleus.hpp>

#include "model_common.hpp"

namespace nc = nucleus;

int main(int argc, char** argv) {
  CLI::App app{"nucleus: generate text with a sampler chain over the reference model"};
  std::string model_path, prompt = "Write one sentence about Kubernetes.", preset;
  float temperature = 0.7f, top_p = 1.0f, min_p = 0.0f;
  int top_k = 0, max_tokens = 64, logprobs = 0;
  std::uint64_t seed = 0;
  bool raw = false, ids_only = false;
  app.add_option("--model", model_path,
                 "a GGUF model (default: SmolLM2-135M-Instruct from scripts/get-model)");
  app.add_option("--prompt", prompt, "the user message (wrapped in the ChatML template unless --raw)");
  app.add_option("--temperature", temperature, "T; 0 is greedy")->check(CLI::Range(0.0f, 100.0f));
  app.add_option("--top-k", top_k, "keep the k most likely (0: off)");
  app.add_option("--top-p", top_p, "nucleus mass in (0, 1] (1: off)");
  app.add_option("--min-p", min_p, "keep p >= m * p_max, m in [0, 1] (0: off)");
  app.add_option("--seed", seed, "the draw_key seed: the same seed gives the same text");
  app.add_option("--max-tokens", max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  app.add_option("--logprobs", logprobs, "print the n most likely alternatives for each token")
      ->check(CLI::Range(0, 20));
  app.add_option("--preset", preset, "eval: T = 0; chat: T = 0.7, top_p 0.9")
      ->check(CLI::IsMember({"eval", "chat"}));
  app.add_flag("--raw", raw, "feed the prompt as is, without the chat template");
  app.add_flag("--ids", ids_only,
               "print token ids instead of text: the prompt's on one line, then per step the drawn id and "
               "the row's argmax");
  CLI11_PARSE(app, argc, argv);
  if (preset == "eval") {
    temperature = 0.0f;
  } else if (preset == "chat") {
    temperature = 0.7f;
    top_p = 0.9f;
  }
  if (!nc::examples::resolve_model(model_path, "generate")) return 1;
  try {
    auto m = nc::examples::load_model(model_path, 2048);
    // Parameters are validated here, at construction: a bad one is an error before any token.
    const auto chain = nc::temperature(temperature) | nc::top_k(top_k) | nc::top_p(top_p) | nc::min_p(min_p) |
                       nc::categorical();
    std::vector<std::pair<std::string, std::string>> messages = {{"user", prompt}};
    const std::string text = raw ? prompt : nc::model::chatml(messages, true);
    std::vector<std::int32_t> ids = m->tok.encode(text);
    if (ids_only) {
      std::printf("prompt:");
      for (const std::int32_t id : ids) std::printf(" %d", id);
      std::printf("\n");
    }
    nc::workspace ws(static_cast<std::size_t>(m->net.vocab()));
    const auto t0 = std::chrono::steady_clock::now();
    std::span<const float> logits = m->net.prefill(ids);
    const auto t1 = std::chrono::steady_clock::now();
    int produced = 0;
    for (; produced < max_tokens; ++produced) {
      const nc::sample_result r = chain(logits, ws, nc::draw_key{seed, static_cast<std::uint64_t>(produced)});
      if (r.status != nc::status::ok || r.token == m->tok.eos()) break;
      if (ids_only) {  // the token, then the row's argmax (the forward pass's own top token)
        std::printf("%d %d\n", r.token, nc::top_logprobs(logits, 1, ws)[0].token);
      } else if (logprobs > 0) {
        std::printf("[%s %.3f |", m->tok.token_text(r.token).c_str(), static_cast<double>(r.logprob));
        for (const auto& t : nc::top_logprobs(logits, static_cast<std::size_t>(logprobs), ws))
          std::printf(" '%s' %.3f", m->tok.token_text(t.token).c_str(), static_cast<double>(t.logprob));
        std::printf("]\n");
      } else {
        std::fputs(m->tok.token_text(r.token).c_str(), stdout);
      }
      std::fflush(stdout);
      if (produced + 1 < max_tokens) logits = m->net.decode(r.token);
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double pre_s = std::chrono::duration<double>(t1 - t0).count();
    const double dec_s = std::chrono::duration<double>(t2 - t1).count();
    if (!ids_only)
      std::printf("\n\n[%zu prompt tokens at %.1f tok/s; %d generated at %.1f tok/s]\n", ids.size(),
                  static_cast<double>(ids.size()) / pre_s, produced, produced / (dec_s > 0 ? dec_s : 1.0));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
