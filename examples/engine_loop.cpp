// A minimal continuous-batching loop: requests with their own knobs join and leave one batch (one of
// them asks for n = 3 samples: three sequences on streams 0, 1, 2 of one seed),
// and every step samples all active rows with one batch_sampler call. Then each request runs alone,
// to show that a row's result does not depend on the batch it rode in (docs/semantics.md).
#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nucleus/engine.hpp>

#include "model_common.hpp"

namespace nc = nucleus;

namespace {

// Everything a run produces for one request; two runs agree when these are equal.
struct trace {
  std::vector<std::int32_t> tokens;     // generated, without the EOS
  std::vector<nc::row_result> results;  // token, logprob, rank, status of every step
  std::vector<nc::token_logprob> top;   // every step's top-n, back to back
  friend bool operator==(const trace&, const trace&) = default;
};

struct request {
  std::string knobs;
  nc::sampler sampler;
  std::vector<std::int32_t> prompt;
  std::size_t max_tokens = 0;
  std::uint64_t stream = 0;         // the sample's index among its request's n (draw_key::stream)
  nc::model::llama* net = nullptr;  // this request's sequence (shared weights, its own KV cache)
  std::span<const float> logits{};  // the next-token logits of that sequence
  trace out{};
};

// Runs `reqs` to completion; request i joins at step i * 3. Returns the batch size of each step.
template <nc::executor E>
std::vector<std::size_t> serve(std::span<request* const> reqs, E&& ex, std::int32_t eos) {
  const auto V = static_cast<std::size_t>(reqs[0]->net->vocab());
  int widest = 0;  // the widest top-n request sets the top-n row stride (logprobs -1 or 0: none)
  for (const request* r : reqs) widest = std::max(widest, r->sampler.params().logprobs);
  const auto top_n = static_cast<std::size_t>(widest);
  nc::batch_sampler sampler(V, ex.concurrency());
  std::vector<request*> active;
  std::vector<float> logits;  // [B, V], row stride V
  std::vector<nc::batch_row> rows;
  std::vector<nc::row_result> results;
  std::vector<nc::token_logprob> top;
  std::vector<std::size_t> sizes;
  for (std::size_t step = 0, joined = 0; joined < reqs.size() || !active.empty(); ++step) {
    if (joined < reqs.size() && step == joined * 3) {  // an arrival: prefill its prompt
      request& r = *reqs[joined++];
      r.out = {};
      r.net->reset();
      r.logits = r.net->prefill(r.prompt);
      active.push_back(&r);
    }
    const std::size_t B = active.size();
    sizes.push_back(B);
    if (B == 0) continue;
    // Gather: row b is active[b]'s last logits row, with its own sampler and histories.
    logits.resize(B * V);
    rows.clear();
    for (std::size_t b = 0; b < B; ++b) {
      const request& r = *active[b];
      std::copy(r.logits.begin(), r.logits.end(), logits.begin() + static_cast<std::ptrdiff_t>(b * V));
      // position = the index of the token being generated, so a row's draw key does not depend
      // on when the request arrived or where it sits in the batch.
      rows.push_back(
          {&r.sampler, nc::row_request{r.prompt, r.out.tokens, {}, r.out.tokens.size(), nullptr, r.stream}});
    }
    results.resize(B);
    top.resize(B * top_n);
    sampler.sample(nc::logits_matrix<float>{logits.data(), B, V, V}, rows, results, ex, top, top_n);
    // Scatter: each request feeds its token to its own sequence; finished ones leave the batch.
    for (std::size_t b = 0; b < B; ++b) {
      request& r = *active[b];
      const nc::row_result& res = results[b];
      r.out.results.push_back(res);
      r.out.top.insert(r.out.top.end(), top.begin() + static_cast<std::ptrdiff_t>(b * top_n),
                       top.begin() + static_cast<std::ptrdiff_t>(b * top_n + res.top_count));
      const bool stop = res.status != nc::status::ok || res.token == eos;
      if (!stop) r.out.tokens.push_back(res.token);
      const bool finished = stop || r.out.tokens.size() == r.max_tokens;
      r.logits = finished ? std::span<const float>{} : r.net->decode(res.token);
    }
    std::erase_if(active, [](const request* r) { return r->logits.empty(); });  // no next logits: done
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nucleus: continuous batching of requests with different sampling knobs (one at n = 3)"};
  std::string model_path;
  int max_tokens = 24;
  std::size_t threads = 2;
  app.add_option("--model", model_path,
                 "a GGUF model (default: SmolLM2-135M-Instruct from scripts/get-model)");
  app.add_option("--max-tokens", max_tokens, "the token budget; the requests take 1, 3/4, 5/4 and 1/2 of it")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "threads of the batch sampler's pool")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  if (!nc::examples::resolve_model(model_path, "engine_loop")) return 1;
  try {
    auto m = nc::examples::load_model(model_path, 256 + 2 * max_tokens);  // short prompts
    auto prompt = [&](const std::string& user) {
      std::vector<std::pair<std::string, std::string>> messages = {{"user", user}};
      return m->tok.encode(nc::model::chatml(messages, true));
    };
    auto budget = [&](int quarters) {
      return static_cast<std::size_t>(std::max(1, max_tokens * quarters / 4));
    };
    // Samplers validate their knobs here; a bad one throws std::invalid_argument naming the field.
    std::vector<request> reqs;
    reqs.push_back({"nucleus   eval: T=0 (greedy)", nc::presets::nucleus({.temperature = 0.0f}),
                    prompt("What is the capital of France?"), budget(4)});
    reqs.push_back({"hf        chat: T=0.7 top_p=0.9 seed=1",
                    nc::presets::hf({.temperature = 0.7f, .top_p = 0.9f, .seed = 1}),
                    prompt("Write one sentence about Kubernetes."), budget(3)});
    reqs.push_back({"vllm      T=0.8 top_k=40 repetition_penalty=1.3 presence_penalty=0.5 seed=2",
                    nc::presets::vllm({.temperature = 0.8f,
                                       .top_k = 40,
                                       .repetition_penalty = 1.3f,
                                       .presence_penalty = 0.5f,
                                       .seed = 2}),
                    prompt("List three colors, one per line."), budget(5)});
    reqs.push_back({"llama_cpp T=0.8 min_p=0.05 seed=3 logprobs=3",
                    nc::presets::llama_cpp({.temperature = 0.8f, .min_p = 0.05f, .seed = 3, .logprobs = 3}),
                    prompt("Tell me a fun fact about octopuses."), budget(2)});
    // One request at n = 3: the same knobs and seed, three streams, three different samples.
    for (std::uint64_t stream = 0; stream < 3; ++stream)
      reqs.push_back({"hf        n=3 T=1.0 top_p=0.95 seed=4, stream " + std::to_string(stream),
                      nc::presets::hf({.temperature = 1.0f, .top_p = 0.95f, .seed = 4}),
                      prompt("Name an animal and say why you like it."), budget(2), stream});
    // One sequence per request: copies of a llama share its weights and get their own KV cache.
    // (The forward passes still run one sequence at a time; the sampling is what is batched.)
    std::vector<nc::model::llama> nets(reqs.size() - 1, m->net);
    nets.push_back(std::move(m->net));
    std::vector<request*> all;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].net = &nets[i];
      all.push_back(&reqs[i]);
    }
    const std::int32_t eos = m->tok.eos();

    nc::thread_pool pool(threads);
    const std::vector<std::size_t> sizes = serve(all, pool, eos);
    std::printf("batch size by step:");
    for (std::size_t s : sizes) std::printf(" %zu", s);
    std::printf("\n");
    std::vector<trace> batched;
    for (const request& r : reqs) batched.push_back(r.out);

    // The same requests again, each alone: a batch of one on the calling thread.
    bool all_same = true;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      request* one = &reqs[i];
      serve(std::span(&one, 1), nc::inline_executor{}, eos);
      const request& r = reqs[i];
      const bool same = r.out == batched[i];  // every token, logprob and top-n, so the text too
      all_same = all_same && same;
      std::printf("\n[%zu] %s\n    joined at step %zu, %zu prompt tokens, max %zu, generated %zu\n", i,
                  r.knobs.c_str(), 3 * i, r.prompt.size(), r.max_tokens, batched[i].tokens.size());
      std::printf("    text: \"%s\"\n", m->tok.decode(batched[i].tokens).c_str());
      if (r.sampler.params().logprobs > 0) {
        const nc::token_logprob* top = batched[i].top.data();
        for (std::size_t t = 0; t < std::min<std::size_t>(3, batched[i].tokens.size()); ++t) {
          const nc::row_result& res = batched[i].results[t];
          std::printf("    token %zu '%s' %.3f (rank %d), top:", t, m->tok.token_text(res.token).c_str(),
                      static_cast<double>(res.logprob), res.rank);
          for (std::uint32_t k = 0; k < res.top_count; ++k, ++top)
            std::printf(" '%s' %.3f", m->tok.token_text(top->token).c_str(),
                        static_cast<double>(top->logprob));
          std::printf("\n");
        }
      }
      std::printf("    same text alone and in the batch: %s\n", same ? "yes" : "no");
    }
    return all_same ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_loop: %s\n", e.what());
    return 1;
  }
}
