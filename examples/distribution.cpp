// The lesson's view of one forward pass: the most likely next tokens at three temperatures, the
// greedy pick, and what top-k and top-p keep. Without a model it shows the embedded worked example.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nucleus/nucleus.hpp>

#include "view.hpp"
#include "worked_example.hpp"
#if defined(NUCLEUS_EXAMPLES_MODEL)
#include "model_common.hpp"
#endif

namespace nc = nucleus;

int main(int argc, char** argv) {
  CLI::App app{"nucleus: the distribution behind the next token"};
  std::string prompt = "Kubernetes pods are scheduled by the";
  std::size_t show = 8;
  std::string model_path;
  bool worked = false;
  app.add_option("--prompt", prompt, "the text whose next token is shown");
  app.add_option("--model", model_path,
                 "a GGUF model (default: SmolLM2-135M-Instruct from scripts/get-model)");
  app.add_flag("--worked-example", worked, "show the embedded worked example instead of a model");
  app.add_option("--top", show, "how many tokens to list")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const auto logits_arr = nc::examples::worked_logits();
  std::span<const float> logits(logits_arr);
  std::function<std::string(std::int32_t)> text = [](std::int32_t id) {
    return std::string(nc::examples::worked_tokens[static_cast<std::size_t>(id)]);
  };
  nc::workspace ws;
#if defined(NUCLEUS_EXAMPLES_MODEL)
  std::unique_ptr<nc::examples::loaded_model> m;
  std::vector<float> model_logits;
  if (!worked) {
    if (model_path.empty())
      if (auto p = nc::examples::default_model()) model_path = p->string();
    if (!model_path.empty()) {
      try {
        m = nc::examples::load_model(model_path, 512);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "distribution: %s\n", e.what());
        return 1;
      }
      std::vector<std::int32_t> ids = m->tok.encode(prompt);
      const auto out = m->net.prefill(ids);
      model_logits.assign(out.begin(), out.end());
      logits = model_logits;
      text = [&m](std::int32_t id) { return m->tok.token_text(id); };
      std::printf("model: %s\nprompt: \"%s\" (%zu tokens), vocabulary %zu\n\n", model_path.c_str(),
                  prompt.c_str(), ids.size(), logits.size());
    }
  }
  if (!m) {
#else
  {
#endif
    if (!worked)
      std::printf("(no model: showing the embedded worked example; scripts/get-model fetches one)\n");
    std::printf("prompt: \"%s\"  (embedded worked example, %zu tokens)\n\n", prompt.c_str(), logits.size());
  }
  for (float t : {0.1f, 1.0f, 2.0f}) nc::examples::print_top(logits, t, show, text, ws);
  const nc::sample_result g = nc::argmax()(logits, ws);
  std::printf("\n  greedy (T = 0) picks '%s', whatever the lower bars say\n", text(g.token).c_str());
  nc::examples::print_kept("top_k(2)  ", nc::top_k(2), logits, text, ws);
  nc::examples::print_kept("top_k(40) ", nc::top_k(40), logits, text, ws);
  nc::examples::print_kept("top_p(0.9)", nc::top_p(0.9f), logits, text, ws);
  const nc::sample_result r =
      (nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical())(logits, ws, {42, 0});
  std::printf("  T = 0.7, top_p 0.9, seed 42 draws '%s' (logprob %.3f)\n", text(r.token).c_str(),
              static_cast<double>(r.logprob));
  return 0;
}
