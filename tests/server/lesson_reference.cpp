// The lesson's answer computed without the server: the model's next-token logits for a prompt and
// nc::top_logprobs over them, as JSON ({"top": [{"id", "text", "logprob"}...]}). lesson.sh compares
// the server's /v1/completions logprobs with this.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>
#include <nucleus/engine.hpp>

#include "model_common.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: nucleus_lesson_reference MODEL PROMPT N\n");
    return 2;
  }
  auto m = nucleus::examples::load_model(argv[1], 512);
  const auto ids = m->tok.encode(argv[2]);
  const auto logits = m->net.prefill(ids);
  nucleus::workspace ws;
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (const nucleus::token_logprob& t :
       nucleus::top_logprobs(logits, std::strtoul(argv[3], nullptr, 10), ws))
    top.push_back({{"id", t.token}, {"text", m->tok.token_text(t.token)}, {"logprob", t.logprob}});
  const nlohmann::ordered_json out = {{"prompt_tokens", ids.size()}, {"top", top}};
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  return 0;
}
