// nucleus-server: an OpenAI-compatible HTTP server over the reference model, with continuous
// batching (scheduler.hpp), every sampling knob of the engine layer, and the distribution page.
// Fields, limits and what is not supported: docs/server.md.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <CLI/CLI.hpp>
#include <nucleus/engine.hpp>
#include <nucleus/io/metadata.hpp>
#include <nucleus/model/dry_breakers.hpp>

#include "api.hpp"
#include "chat.hpp"
#include "model_common.hpp"
#include "page.hpp"
#include "scheduler.hpp"

// Last: httplib.h pulls in <resolv.h>, whose `_res` macro breaks Eigen headers included after it.
#include <httplib.h>

#include "connection.hpp"

namespace nc = nucleus;
namespace srv = nucleus::server;
using srv::api_error;
using srv::json;

namespace {

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A token's text as JSON shows it (bytes that are not UTF-8 on their own become U+FFFD).
json token_string(const std::string& bytes) {
  return json::parse(dump(json(bytes)));
}

json token_bytes(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(c);
  return out;
}

struct server_options {
  std::size_t max_body = 1 << 20;
  srv::limits limits;
};

class service {
 public:
  service(nc::examples::loaded_model& m, std::string name, srv::scheduler::options sched, server_options opt)
      : m_(m),
        name_(std::move(name)),
        opt_(opt),
        chat_(nc::io::get_string(m.file, "tokenizer.chat_template")),
        scheduler_(m.net, m.tok, sched),
        created_(std::time(nullptr)) {
    if (auto end = m.tok.find("<|im_end|>")) im_end_ = *end;
  }

  srv::scheduler& scheduler() { return scheduler_; }
  std::atomic<bool> draining{false};

  void routes(httplib::Server& svr) {
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(srv::page_html), "text/html; charset=utf-8");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const srv::scheduler_stats s = scheduler_.stats();
      json j = {{"status", draining ? "draining" : "ok"},
                {"nucleus",
                 {{"active", s.active},
                  {"queued", s.queued},
                  {"max_batch", s.max_batch},
                  {"steps", s.steps},
                  {"tokens", s.tokens},
                  {"prefills", s.prefills},
                  {"step_seconds", s.step_seconds},
                  {"sample_seconds", s.sample_seconds},
                  {"forward_seconds", s.forward_seconds},
                  {"prefill_seconds", s.prefill_seconds}}}};
      res.set_content(dump(j), "application/json");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"object", "list"},
                {"data",
                 {{{"id", name_},
                   {"object", "model"},
                   {"created", created_},
                   {"owned_by", "nucleus"},
                   {"max_model_len", m_.net.context()}}}}};
      res.set_content(dump(j), "application/json");
    });
    auto post = [&](const char* path, srv::endpoint kind) {
      svr.Post(path, [this, kind](const httplib::Request& req, httplib::Response& res) {
        try {
          if (draining) throw api_error(503, "", "the server is shutting down", "server_error");
          handle(kind, req, res);
        } catch (const api_error& e) {
          res.status = e.status;
          res.set_content(dump(e.body()), "application/json");
        }
      });
    };
    post("/v1/completions", srv::endpoint::completions);
    post("/v1/chat/completions", srv::endpoint::chat);
    post("/v1/nucleus/distribution", srv::endpoint::distribution);
  }

 private:
  // The prompt's tokens, checked against the vocabulary and the context.
  std::vector<std::int32_t> prompt_tokens(const srv::generation_request& r) const {
    std::vector<std::int32_t> ids;
    const char* param = r.messages.empty() ? "prompt" : "messages";
    if (!r.messages.empty()) {
      if (!chat_.supported())
        throw api_error(400, "messages",
                        "messages: this model's chat template is not ChatML; use /v1/completions");
      ids = m_.tok.encode(chat_.render(r.messages));
    } else if (const auto* text = std::get_if<std::string>(&r.prompt)) {
      try {
        ids = m_.tok.encode(*text);
      } catch (const std::exception& e) {
        throw api_error(400, param, std::string(param) + ": " + e.what());
      }
    } else {
      ids = std::get<std::vector<std::int32_t>>(r.prompt);
      for (std::int32_t t : ids)
        if (t >= m_.net.vocab())
          throw api_error(
              400, param,
              std::string(param) + ": token id " + std::to_string(t) + " is not in the vocabulary");
    }
    if (ids.empty()) throw api_error(400, param, std::string(param) + ": empty (it has no tokens)");
    if (static_cast<std::int64_t>(ids.size()) >= m_.net.context())
      throw api_error(400, param,
                      std::string(param) + ": " + std::to_string(ids.size()) + " tokens; the context holds " +
                          std::to_string(m_.net.context()) + " (with at least one to generate)");
    return ids;
  }

  void check_ids(const char* param, const std::vector<std::int32_t>& ids) const {
    for (std::int32_t t : ids)
      if (t >= m_.net.vocab())
        throw api_error(400, param,
                        std::string(param) + ": token id " + std::to_string(t) + " is not in the vocabulary");
  }

  // The request's sampler: its knobs and seed, the model's end tokens. Its n choices share it and
  // draw on their own streams of the key (draw_key::stream = the choice's index).
  std::shared_ptr<const nc::sampler> make_sampler(srv::generation_request& r, bool chat) {
    nc::sampling_params p = r.params;
    for (const nc::token_bias& b : p.logit_bias)
      if (b.token >= m_.net.vocab())
        throw api_error(400, "logit_bias." + std::to_string(b.token),
                        "logit_bias: token id " + std::to_string(b.token) + " is not in the vocabulary");
    check_ids("nucleus.allowed_token_ids", p.allowed_token_ids);
    check_ids("nucleus.banned_token_ids", p.banned_token_ids);
    if (!r.ignore_eos) p.eos_token_ids = end_tokens(chat);
    if (!r.dry_breakers.empty())
      p.dry_sequence_breakers = nc::model::dry_sequence_breakers(m_.tok, r.dry_breakers);
    if (!r.seed) r.seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
    p.seed = *r.seed;
    try {
      return std::make_shared<const nc::sampler>(p, r.order);
    } catch (const std::invalid_argument& e) {
      throw srv::sampler_error(e);
    }
  }

  std::vector<std::int32_t> end_tokens(bool chat) const {
    std::vector<std::int32_t> ends;
    if (m_.tok.eos() >= 0) ends.push_back(m_.tok.eos());
    if (chat && im_end_ >= 0 && im_end_ != m_.tok.eos()) ends.push_back(im_end_);
    return ends;
  }

  void handle(srv::endpoint kind, const httplib::Request& req, httplib::Response& res) {
    srv::generation_request r = srv::parse_request(req.body, kind, opt_.limits);
    const bool chat =
        kind == srv::endpoint::chat || (kind == srv::endpoint::distribution && !r.messages.empty());
    std::vector<std::int32_t> prompt = prompt_tokens(r);
    if (kind == srv::endpoint::distribution) return distribution(r, std::move(prompt), chat, res);
    if (r.echo && r.logprobs >= 0) throw api_error(400, "echo", "echo: not supported together with logprobs");
    const auto room = static_cast<std::size_t>(m_.net.context()) - prompt.size();
    const std::size_t max_tokens = r.max_tokens ? static_cast<std::size_t>(*r.max_tokens) : chat ? room : 16;
    if (max_tokens > room)
      throw api_error(400, "max_tokens",
                      "max_tokens: " + std::to_string(max_tokens) + " tokens after a prompt of " +
                          std::to_string(prompt.size()) + " exceed the context of " +
                          std::to_string(m_.net.context()));
    const auto sampler = make_sampler(r, chat);
    const auto n = static_cast<std::size_t>(r.n);
    auto channel = std::make_shared<srv::request_channel>(n);
    channel->prompt_tokens = prompt.size();
    std::vector<srv::sequence_job> jobs;
    for (std::size_t i = 0; i < n; ++i) {
      srv::sequence_job j;
      j.prompt = prompt;
      j.sampling = sampler;
      j.max_tokens = max_tokens;
      j.stop = r.stop;
      if (!r.ignore_eos) j.stop_tokens = end_tokens(chat);
      j.channel = channel;
      j.choice = i;
      jobs.push_back(std::move(j));
    }
    if (!scheduler_.submit(std::move(jobs)))
      throw api_error(503, "", "the server is busy or shutting down; retry later", "server_error");
    const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++);
    const std::string echo = r.echo ? m_.tok.decode(prompt) : std::string();
    if (r.stream) return stream(r, chat, id, echo, channel, res);
    complete(r, chat, id, echo, *channel, res);
  }

  json usage(const srv::request_channel& ch) const {
    return {{"prompt_tokens", ch.prompt_tokens},
            {"completion_tokens", ch.completion_tokens},
            {"total_tokens", ch.prompt_tokens + ch.completion_tokens}};
  }

  // Completions style: tokens, token_logprobs, top_logprobs (token -> logprob), text_offset.
  struct completion_logprobs {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  };
  void add_completion_logprobs(completion_logprobs& lp, const srv::token_event& ev,
                               std::size_t offset) const {
    lp.tokens.push_back(token_string(m_.tok.token_text(ev.token)));
    lp.token_logprobs.push_back(ev.result.logprob);
    json top = json::object();
    for (const nc::token_logprob& t : ev.top) {
      const json key = token_string(m_.tok.token_text(t.token));
      if (!top.contains(key.get<std::string>())) top[key.get<std::string>()] = t.logprob;
    }
    lp.top.push_back(top);
    lp.offsets.push_back(offset);
  }
  json chat_logprob(const srv::token_event& ev) const {
    const std::string text = m_.tok.token_text(ev.token);
    json top = json::array();
    for (const nc::token_logprob& t : ev.top) {
      const std::string tt = m_.tok.token_text(t.token);
      top.push_back({{"token", token_string(tt)}, {"logprob", t.logprob}, {"bytes", token_bytes(tt)}});
    }
    return {{"token", token_string(text)},
            {"logprob", ev.result.logprob},
            {"bytes", token_bytes(text)},
            {"top_logprobs", top}};
  }

  void complete(const srv::generation_request& r, bool chat, const std::string& id, const std::string& echo,
                srv::request_channel& ch, httplib::Response& res) {
    const std::size_t n = static_cast<std::size_t>(r.n);
    std::vector<std::string> text(n, echo);
    std::vector<completion_logprobs> lp(n);
    std::vector<json> content(n, json::array());
    std::vector<std::string> finish(n);
    srv::token_event ev;
    bool quiet = false;  // no event came within the wait
    for (;;) {
      // Nothing is written until the end, so the client's departure is looked for between events
      // (after each token, and every 50 ms while none comes): its sequences end at the next step.
      const bool got = ch.next_for(ev, std::chrono::milliseconds(50), quiet);
      if (srv::client_left()) {
        ch.cancelled = true;
        throw api_error(499, "", "the client closed the connection", "server_error");
      }
      if (!got && quiet) continue;
      if (!got) break;
      if (!ev.error.empty()) {
        ch.cancelled = true;  // the other choices stop at the next step
        throw api_error(500, "", "generation failed: " + ev.error, "server_error");
      }
      if (ev.end) {
        finish[ev.choice] = ev.finish;
        continue;
      }
      if (ev.token >= 0 && r.logprobs >= 0) {
        if (chat)
          content[ev.choice].push_back(chat_logprob(ev));
        else
          add_completion_logprobs(lp[ev.choice], ev, text[ev.choice].size());
      }
      text[ev.choice] += ev.text;
    }
    json choices = json::array();
    for (std::size_t i = 0; i < n; ++i) {
      json c = {{"index", i}, {"finish_reason", finish[i]}};
      if (chat) {
        c["message"] = {{"role", "assistant"}, {"content", text[i]}};
        c["logprobs"] = r.logprobs >= 0 ? json{{"content", content[i]}} : json(nullptr);
      } else {
        c["text"] = text[i];
        c["logprobs"] = r.logprobs >= 0 ? json{{"tokens", lp[i].tokens},
                                               {"token_logprobs", lp[i].token_logprobs},
                                               {"top_logprobs", lp[i].top},
                                               {"text_offset", lp[i].offsets}}
                                        : json(nullptr);
      }
      choices.push_back(c);
    }
    json body = {{"id", id},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", std::time(nullptr)},
                 {"model", name_},
                 {"choices", choices},
                 {"usage", usage(ch)}};
    res.set_content(dump(body), "application/json");
  }

  void stream(const srv::generation_request& r, bool chat, const std::string& id, const std::string& echo,
              std::shared_ptr<srv::request_channel> ch, httplib::Response& res) {
    const auto created = std::time(nullptr);
    auto chunk = [this, chat, id, created](json choices) {
      return json{{"id", id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", name_},
                  {"choices", std::move(choices)}};
    };
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, r, chat, echo, ch, chunk](std::size_t, httplib::DataSink& sink) {
          auto send = [&](const json& j) {
            const std::string line = "data: " + dump(j) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          auto leave = [&] {
            ch->cancelled = true;
            return false;
          };
          const std::size_t n = static_cast<std::size_t>(r.n);
          std::vector<std::size_t> offset(n, echo.size());
          for (std::size_t i = 0; i < n; ++i) {  // the first chunk: the role, or the echoed prompt
            json c = {{"index", i}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
            if (chat)
              c["delta"] = {{"role", "assistant"}, {"content", ""}};
            else
              c["text"] = echo;
            if (!send(chunk(json::array({c})))) return leave();
          }
          srv::token_event ev;
          while (ch->next(ev)) {
            json c = {{"index", ev.choice}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
            if (!ev.error.empty()) {
              const api_error e(500, "", "generation failed: " + ev.error, "server_error");
              send(e.body());
              return leave();
            }
            if (ev.end) {
              c["finish_reason"] = ev.finish;
              if (chat)
                c["delta"] = json::object();
              else
                c["text"] = "";
            } else {
              if (chat)
                c["delta"] = {{"content", ev.text}};
              else
                c["text"] = ev.text;
              if (ev.token >= 0 && r.logprobs >= 0) {
                if (chat) {
                  c["logprobs"] = {{"content", json::array({chat_logprob(ev)})}};
                } else {
                  completion_logprobs lp;
                  add_completion_logprobs(lp, ev, offset[ev.choice]);
                  c["logprobs"] = {{"tokens", lp.tokens},
                                   {"token_logprobs", lp.token_logprobs},
                                   {"top_logprobs", lp.top},
                                   {"text_offset", lp.offsets}};
                }
              }
              offset[ev.choice] += ev.text.size();
            }
            // A write that fails means the client left: its sequences end at the next step.
            if (!send(chunk(json::array({c})))) return leave();
          }
          if (r.include_usage) {
            json u = chunk(json::array());
            u["usage"] = usage(*ch);
            if (!send(u)) return false;
          }
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        },
        [ch](bool success) {
          if (!success) ch->cancelled = true;
        });
  }

  // The next-token distribution before and after the knobs: the page's data.
  void distribution(srv::generation_request& r, std::vector<std::int32_t> prompt, bool chat,
                    httplib::Response& res) {
    const bool seeded = r.seed.has_value();
    auto sampler = make_sampler(r, chat);
    auto channel = std::make_shared<srv::request_channel>(1);
    auto result = std::make_shared<json>();
    const auto top_n = static_cast<std::size_t>(r.top);
    srv::sequence_job j;
    j.prompt = prompt;
    j.sampling = sampler;
    j.channel = channel;
    j.on_logits = [this, sampler, result, top_n, seeded, prompt](std::span<const float> row) {
      nc::workspace ws;
      const auto shown = nc::top_logprobs(row, top_n, ws);
      const std::vector<nc::token_logprob> top(shown.begin(), shown.end());
      std::unordered_map<std::int32_t, float> kept;
      float mu = nc::mirostat_initial_mu(sampler->params().mirostat_tau);
      const nc::row_request rq{prompt, {}, {}, 0, &mu};
      const nc::distribution d = sampler->process(row, ws, rq);
      for (std::size_t i = 0; i < d.size(); ++i) kept[d.ids()[i]] = d.probs()[i];
      json tokens = json::array();
      for (const nc::token_logprob& t : top) {
        const auto it = kept.find(t.token);
        const std::string text = m_.tok.token_text(t.token);
        tokens.push_back({{"id", t.token},
                          {"text", token_string(text)},
                          {"logprob", t.logprob},
                          {"p_raw", std::exp(static_cast<double>(t.logprob))},
                          {"kept", it != kept.end()},
                          {"p", it != kept.end() ? it->second : 0.0f}});
      }
      json out = {{"vocab", row.size()},
                  {"prompt_tokens", prompt.size()},
                  {"kept", d.size()},
                  {"status", std::string(nc::to_string(d.status()))},
                  {"tokens", tokens}};
      if (!top.empty()) {
        out["greedy"] = {{"id", top[0].token}, {"text", token_string(m_.tok.token_text(top[0].token))}};
      }
      if (seeded) {
        mu = nc::mirostat_initial_mu(sampler->params().mirostat_tau);
        const nc::row_result s = sampler->sample(row, ws, rq);
        if (s.status == nc::status::ok)
          out["sample"] = {{"id", s.token},
                           {"text", token_string(m_.tok.token_text(s.token))},
                           {"seed", sampler->params().seed}};
      }
      *result = std::move(out);
    };
    if (!scheduler_.submit({std::move(j)}))
      throw api_error(503, "", "the server is busy or shutting down; retry later", "server_error");
    srv::token_event ev;
    while (channel->next(ev))
      if (!ev.error.empty()) throw api_error(500, "", "distribution failed: " + ev.error, "server_error");
    res.set_content(dump(*result), "application/json");
  }

  nc::examples::loaded_model& m_;
  std::string name_;
  server_options opt_;
  srv::chat_template chat_;
  srv::scheduler scheduler_;
  std::int64_t created_;
  std::int32_t im_end_ = -1;
  std::atomic<std::uint64_t> next_id_{1};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nucleus-server: OpenAI-compatible completions over the reference model"};
  std::string model_path, host = "127.0.0.1";
  int port = 8080;
  std::size_t threads = 2, max_batch = 8, max_queue = 256, max_body = 1 << 20;
  std::int64_t ctx = 2048;
  int max_n = 8;
  double request_read_timeout = 30;
  app.add_option("--model", model_path,
                 "a GGUF model (default: SmolLM2-135M-Instruct from scripts/get-model)");
  app.add_option("--host", host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", port, "port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  app.add_option("--threads", threads, "threads for sampling and forward passes")->check(CLI::Range(1, 256));
  app.add_option("--max-batch", max_batch, "sequences stepped together")->check(CLI::Range(1, 256));
  app.add_option("--ctx", ctx, "context length of each sequence")->check(CLI::Range(16, 1 << 20));
  app.add_option("--max-queue", max_queue, "sequences waiting to join before requests get 503")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-body", max_body, "largest request body in bytes (larger: 413)")
      ->check(CLI::Range(64, 1 << 30));
  app.add_option("--max-n", max_n, "most choices (n) per request")->check(CLI::Range(1, 256));
  app.add_option("--request-read-timeout", request_read_timeout,
                 "seconds a client may take to send one request, line, headers and body (slower: closed)")
      ->check(CLI::Range(0.1, 3600.0));
  CLI11_PARSE(app, argc, argv);

  // SIGTERM and SIGINT go to one waiting thread (blocked here, before any thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  if (!nc::examples::resolve_model(model_path, "nucleus-server")) return 1;
  try {
    auto m = nc::examples::load_model(model_path, ctx);
    server_options opt;
    opt.max_body = max_body;
    opt.limits.max_n = max_n;
    service svc(*m, std::filesystem::path(model_path).stem().string(), {max_batch, threads, max_queue}, opt);
    srv::guarded_server svr;
    svr.request_limit = std::chrono::milliseconds(static_cast<long long>(request_read_timeout * 1000));
    svr.new_task_queue = [] { return new httplib::ThreadPool(64); };
    svr.set_payload_max_length(max_body);
    svr.set_keep_alive_timeout(2);
    svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      const char* what = res.status == 413   ? "the request body is larger than the server's --max-body"
                         : res.status == 404 ? "no such endpoint"
                                             : "request failed";
      res.set_content(dump(api_error(res.status, "", what).body()), "application/json");
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(dump(api_error(500, "", what, "server_error").body()), "application/json");
    });
    svc.routes(svr);
    const int bound = port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
    if (bound < 0) {
      std::fprintf(stderr, "nucleus-server: cannot listen on %s:%d\n", host.c_str(), port);
      return 1;
    }
    std::atomic<bool> signalled{false};
    std::thread stopper([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      signalled = true;
      std::fprintf(stderr, "nucleus-server: signal %d: draining in-flight requests\n", sig);
      svc.draining = true;
      svr.stop();
    });
    std::printf("nucleus-server: %s, vocabulary %lld, context %lld, max batch %zu, %zu threads\n",
                model_path.c_str(), static_cast<long long>(m->net.vocab()), static_cast<long long>(ctx),
                max_batch, threads);
    std::printf("nucleus-server: listening on http://%s:%d%s\n", host.c_str(), bound,
                host == "127.0.0.1" ? " (this machine only; --host 0.0.0.0 listens on every interface)" : "");
    std::fflush(stdout);
    svr.listen_after_bind();  // returns after stop(), once every in-flight handler has finished
    svc.draining = true;
    svc.scheduler().shut_down();
    if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the waiting thread
    stopper.join();
    std::printf("nucleus-server: stopped\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nucleus-server: %s\n", e.what());
    return 1;
  }
}
