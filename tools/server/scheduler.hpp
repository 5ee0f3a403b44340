// Continuous batching over the reference model: one scheduler thread steps every active sequence.
// A step samples all active rows with one batch_sampler call on the thread pool, then runs each
// sequence's next forward pass (in parallel over the same pool). Sequences join (prefill) and leave
// between steps. A sequence's tokens depend only on its own prompt, sampler and seed: its forward
// passes use its own KV cache, and a batch row's result depends only on that row.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nucleus/engine.hpp>
#include <nucleus/model/llama.hpp>
#include <nucleus/model/tokenizer.hpp>

namespace nucleus::server {

// One step of one choice as the client sees it: a token with the text it released (text is held
// back while it could still be the start of a stop string or of an unfinished UTF-8 character), or
// the choice's end. `finish` is "stop" or "length"; empty for a sequence the client left or that
// failed (`error` then says why).
struct token_event {
  std::size_t choice = 0;
  std::int32_t token = -1;  // -1: no token (released text only, or the end)
  std::string text;
  row_result result;
  std::vector<token_logprob> top;
  bool end = false;
  std::string finish;
  std::string error;
};

// What a request's handler reads, written by the scheduler thread: every choice's events in order.
struct request_channel {
  explicit request_channel(std::size_t choices) : remaining(choices) {}

  std::mutex mutex;
  std::condition_variable ready;
  std::deque<token_event> events;
  std::size_t remaining;  // choices not yet ended
  std::size_t prompt_tokens = 0;
  std::size_t completion_tokens = 0;
  std::atomic<bool> cancelled{false};  // the client left: every choice ends at the next step

  // Waits for the next event; false once every choice has ended and every event was read.
  bool next(token_event& out) {
    std::unique_lock lock(mutex);
    ready.wait(lock, [&] { return !events.empty() || remaining == 0; });
    if (events.empty()) return false;
    out = std::move(events.front());
    events.pop_front();
    return true;
  }
  // The same, waiting at most `patience`: false with `timed_out` set when no event came in time.
  bool next_for(token_event& out, std::chrono::milliseconds patience, bool& timed_out) {
    std::unique_lock lock(mutex);
    timed_out = !ready.wait_for(lock, patience, [&] { return !events.empty() || remaining == 0; });
    if (events.empty()) return false;
    out = std::move(events.front());
    events.pop_front();
    return true;
  }
  void push(token_event ev, bool counts_token) {
    {
      std::lock_guard lock(mutex);
      if (ev.end) --remaining;
      if (counts_token) ++completion_tokens;
      events.push_back(std::move(ev));
    }
    ready.notify_all();
  }
};

struct sequence_job {
  std::vector<std::int32_t> prompt;
  std::shared_ptr<const nucleus::sampler> sampling;
  std::size_t max_tokens = 16;
  std::vector<std::string> stop;
  std::vector<std::int32_t> stop_tokens;  // end the sequence without emitting them (EOS)
  std::shared_ptr<request_channel> channel;
  std::size_t choice = 0;
  // Set for a look at the next-token distribution only: called on the scheduler thread with the
  // prompt's next-token logits; the sequence then ends without generating.
  std::function<void(std::span<const float>)> on_logits;
};

struct scheduler_stats {
  std::uint64_t steps = 0;
  std::uint64_t tokens = 0;
  std::uint64_t prefills = 0;
  double step_seconds = 0;     // whole steps: sampling + forward passes
  double sample_seconds = 0;   // batch_sampler calls
  double forward_seconds = 0;  // decode passes
  double prefill_seconds = 0;  // prompts
  std::size_t active = 0;
  std::size_t queued = 0;
  std::size_t max_batch = 0;
};

// Releases text while it cannot be the start of a stop string or of a UTF-8 character.
class stop_matcher {
 public:
  explicit stop_matcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends `piece`; returns the text now safe to send and sets `stopped` when a stop string
  // appeared (the text up to the earliest one is returned; the stop string itself is not). As vLLM
  // checks after every token: a stop string that would begin earlier but is not complete yet loses.
  std::string push(std::string_view piece, bool& stopped) {
    text_ += piece;
    stopped = false;
    std::size_t cut = std::string::npos;
    // Released text holds no stop string nor the start of one: search only what is held back.
    for (const std::string& s : stops_) cut = std::min(cut, text_.find(s, released_));
    if (cut != std::string::npos) {
      stopped = true;
      return take(cut);
    }
    std::size_t safe = text_.size();
    for (const std::string& s : stops_) {  // the longest suffix that begins a stop string is held
      for (std::size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k) {
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, text_.size() - k);
          break;
        }
      }
    }
    return take(std::min(safe, utf8_complete(text_, released_)));
  }
  // Everything not yet released (at the end of a sequence that did not stop on a string).
  std::string flush() { return take(text_.size()); }

 private:
  std::string take(std::size_t end) {
    if (end <= released_) return {};
    std::string out = text_.substr(released_, end - released_);
    released_ = end;
    return out;
  }
  // The end of the last complete UTF-8 character at or after `from`.
  static std::size_t utf8_complete(const std::string& s, std::size_t from) {
    std::size_t end = s.size();
    for (std::size_t back = 0; back < 4 && end > from; ++back) {
      const auto c = static_cast<unsigned char>(s[end - 1 - back]);
      if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back for the lead
      const std::size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      return back + 1 >= need ? end : end - back - 1;
    }
    return end;
  }

  std::vector<std::string> stops_;
  std::string text_;
  std::size_t released_ = 0;
};

class scheduler {
 public:
  struct options {
    std::size_t max_batch = 8;
    std::size_t threads = 2;
    std::size_t max_queue = 256;  // waiting sequences; beyond it submit() refuses
  };

  scheduler(const model::llama& net, const model::tokenizer& tok, options opt)
      : tok_(tok),
        opt_(opt),
        pool_(std::max<std::size_t>(1, opt.threads)),
        sampler_(static_cast<std::size_t>(net.vocab()), pool_.concurrency()) {
    slots_.assign(opt_.max_batch, net);  // copies share the weights; each has its own KV cache
    free_.resize(opt_.max_batch);
    for (std::size_t i = 0; i < opt_.max_batch; ++i) free_[i] = opt_.max_batch - 1 - i;
    vocab_ = static_cast<std::size_t>(net.vocab());
    thread_ = std::thread([this] { loop(); });
  }
  ~scheduler() { shut_down(); }
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // Queues every choice of one request together; false when the queue is full or shutting down.
  bool submit(std::vector<sequence_job> jobs) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || queue_.size() + jobs.size() > opt_.max_queue) return false;
      for (auto& j : jobs) queue_.push_back(std::move(j));
    }
    wake_.notify_one();
    return true;
  }

  // Finishes the queued and active sequences, then stops the thread.
  void shut_down() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  scheduler_stats stats() const {
    std::lock_guard lock(mutex_);
    scheduler_stats s = stats_;
    s.queued = queue_.size();
    s.max_batch = opt_.max_batch;
    return s;
  }

 private:
  struct active_sequence {
    sequence_job job;
    model::llama* net = nullptr;
    std::size_t slot = 0;
    std::span<const float> logits;
    std::vector<std::int32_t> output;
    float mu = 0.0f;
    stop_matcher text{{}};
    bool done = false;
  };

  using clock = std::chrono::steady_clock;
  static double seconds(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }

  static void finish(const sequence_job& j, std::string reason, std::string error = {}) {
    token_event ev;
    ev.choice = j.choice;
    ev.end = true;
    ev.finish = std::move(reason);
    ev.error = std::move(error);
    j.channel->push(std::move(ev), false);
  }

  // Prefills a joining sequence; false when it ended at once (a look at logits, cancelled, error).
  bool start(active_sequence& a) {
    const sequence_job& j = a.job;
    request_channel& ch = *j.channel;
    if (ch.cancelled.load()) {
      finish(j, "");
      return false;
    }
    const auto t0 = clock::now();
    try {
      a.net->reset();
      a.logits = a.net->prefill(j.prompt);
    } catch (const std::exception& e) {
      finish(j, "", e.what());
      return false;
    }
    {
      std::lock_guard lock(mutex_);
      stats_.prefills += 1;
      stats_.prefill_seconds += seconds(t0, clock::now());
    }
    if (j.on_logits) {
      try {
        j.on_logits(a.logits);
        finish(j, "stop");
      } catch (const std::exception& e) {
        finish(j, "", e.what());
      }
      return false;
    }
    a.mu = mirostat_initial_mu(j.sampling->params().mirostat_tau);
    a.text = stop_matcher(j.stop);
    if (j.max_tokens == 0) {
      finish(j, "length");
      return false;
    }
    return true;
  }

  // Handles a row's result; true when the sequence goes on to its next forward pass.
  bool advance(active_sequence& a, const row_result& r, std::span<const token_logprob> top) {
    const sequence_job& j = a.job;
    request_channel& ch = *j.channel;
    if (ch.cancelled.load()) {
      finish(j, "");
      return false;
    }
    if (r.status != status::ok) {
      finish(j, "", "sampling failed: " + std::string(to_string(r.status)));
      return false;
    }
    if (std::find(j.stop_tokens.begin(), j.stop_tokens.end(), r.token) != j.stop_tokens.end()) {
      // The end token was generated (usage counts it) but its text is not sent.
      token_event tail;  // no token: only the text held back so far
      tail.choice = j.choice;
      tail.text = a.text.flush();
      ch.push(std::move(tail), true);
      finish(j, "stop");
      return false;
    }
    a.output.push_back(r.token);
    bool stopped = false;
    token_event ev;
    ev.choice = j.choice;
    ev.token = r.token;
    ev.text = a.text.push(tok_.token_text(r.token), stopped);
    ev.result = r;
    ev.top.assign(top.begin(), top.end());
    const bool length = a.output.size() >= j.max_tokens || a.net->position() >= a.net->context();
    if (!stopped && length) ev.text += a.text.flush();
    ch.push(std::move(ev), true);
    if (stopped || length) {
      finish(j, stopped ? "stop" : "length");
      return false;
    }
    return true;
  }

  void loop() {
    std::vector<active_sequence> active;
    std::vector<float> logits;
    std::vector<batch_row> rows;
    std::vector<row_result> results;
    std::vector<token_logprob> top;
    std::vector<std::size_t> going;
    for (;;) {
      std::vector<sequence_job> joining;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active.empty(); });
        if (stopping_ && queue_.empty() && active.empty()) return;
        while (!queue_.empty() && !free_.empty() && active.size() + joining.size() < opt_.max_batch) {
          joining.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      for (sequence_job& j : joining) {
        active_sequence a;
        a.job = std::move(j);
        a.slot = take_slot();
        a.net = &slots_[a.slot];
        if (start(a)) {
          active.push_back(std::move(a));
        } else {
          give_slot(a.slot);
        }
      }
      if (active.empty()) continue;
      const auto t0 = clock::now();
      // Gather: row b is active[b]'s next-token logits with its own sampler and history.
      const std::size_t B = active.size();
      std::size_t top_n = 0;
      for (const active_sequence& a : active) top_n = std::max(top_n, a.job.sampling->top_n());
      logits.resize(B * vocab_);
      rows.clear();
      for (std::size_t b = 0; b < B; ++b) {
        active_sequence& a = active[b];
        std::copy(a.logits.begin(), a.logits.end(), logits.begin() + static_cast<std::ptrdiff_t>(b * vocab_));
        // position: the index of the token being generated, so a draw does not depend on batchmates;
        // stream: the choice, so a request's n choices differ and choice 0 is the n = 1 answer.
        rows.push_back({a.job.sampling.get(),
                        row_request{a.job.prompt, a.output, {}, a.output.size(), &a.mu, a.job.choice}});
      }
      results.assign(B, {});
      top.resize(B * top_n);
      sampler_.sample(logits_matrix<float>{logits.data(), B, vocab_, vocab_}, rows, results, pool_, top,
                      top_n);
      const auto t1 = clock::now();
      going.clear();
      for (std::size_t b = 0; b < B; ++b) {
        const std::span<const token_logprob> t(top.data() + b * top_n, results[b].top_count);
        if (advance(active[b], results[b], t))
          going.push_back(b);
        else
          active[b].done = true;
      }
      // The forward passes, one sequence per task: each touches only its own KV cache and buffers.
      pool_.bulk(going.size(), [&](std::size_t i, std::size_t) {
        active_sequence& a = active[going[i]];
        a.logits = a.net->decode(a.output.back());
      });
      const auto t2 = clock::now();
      for (const active_sequence& a : active)
        if (a.done) give_slot(a.slot);
      std::erase_if(active, [](const active_sequence& a) { return a.done; });
      std::lock_guard lock(mutex_);
      stats_.steps += 1;
      stats_.tokens += B;
      stats_.sample_seconds += seconds(t0, t1);
      stats_.forward_seconds += seconds(t1, t2);
      stats_.step_seconds += seconds(t0, t2);
      stats_.active = active.size();
    }
  }

  std::size_t take_slot() {
    std::lock_guard lock(mutex_);
    const std::size_t s = free_.back();
    free_.pop_back();
    return s;
  }
  void give_slot(std::size_t s) {
    std::lock_guard lock(mutex_);
    free_.push_back(s);
  }

  const model::tokenizer& tok_;
  options opt_;
  thread_pool pool_;
  batch_sampler sampler_;
  std::vector<model::llama> slots_;
  std::vector<std::size_t> free_;
  std::size_t vocab_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<sequence_job> queue_;
  bool stopping_ = false;
  scheduler_stats stats_;
  std::thread thread_;
};

}  // namespace nucleus::server
