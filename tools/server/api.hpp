// The OpenAI-style request bodies nucleus-server accepts, parsed and checked without HTTP or a model:
// every field is type-checked and range-checked here or by the sampler's own validation, and every
// error names its parameter. Fuzzed by tests/fuzz/server_request.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>
#include <nucleus/engine/knobs.hpp>

namespace nucleus::server {

using json = nlohmann::ordered_json;

// An OpenAI-style error: HTTP status, the offending parameter (may be empty) and a message.
struct api_error : std::runtime_error {
  int status;
  std::string param;
  std::string type;
  api_error(int http_status, std::string parameter, const std::string& message,
            std::string error_type = "invalid_request_error")
      : std::runtime_error(message),
        status(http_status),
        param(std::move(parameter)),
        type(std::move(error_type)) {}

  json body() const {
    return {{"error",
             {{"message", what()},
              {"type", type},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", nullptr}}}};
  }
};

[[noreturn]] inline void bad_request(const std::string& param, const std::string& message) {
  throw api_error(400, param, param.empty() ? message : param + ": " + message);
}

struct limits {
  int max_n = 8;                  // choices per request
  int max_logprobs = 20;          // top alternatives per token (OpenAI's chat limit)
  std::size_t max_stop = 4;       // stop strings per request (OpenAI's limit)
  std::size_t max_items = 4096;   // entries of any list field (logit_bias, token ids, messages)
  std::size_t max_breakers = 64;  // DRY breaker strings: each is a scan of the vocabulary
};

struct chat_message {
  std::string role;
  std::string content;
};

enum class endpoint { completions, chat, distribution };

// Everything a generation request asks for, with the knobs as a sampling_params that the server
// turns into one sampler per choice (after it tokenizes the DRY breakers).
struct generation_request {
  endpoint kind = endpoint::completions;
  std::variant<std::string, std::vector<std::int32_t>> prompt;  // completions, distribution
  std::vector<chat_message> messages;                           // chat (distribution may use it)
  std::optional<int> max_tokens;  // unset: 16 for completions, the rest of the context for chat
  int n = 1;
  std::vector<std::string> stop;
  int logprobs = -1;  // alternatives per token; -1: no logprobs at all
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  std::optional<std::uint64_t> seed;
  bool ignore_eos = false;
  int top = 20;  // distribution: how many of the most likely tokens to show
  sampling_params params;
  engine_order order = engine_order::nucleus;
  std::vector<std::string> dry_breakers;  // strings, tokenized against the model's vocabulary
};

namespace detail {

inline const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

[[noreturn]] inline void wrong_type(const std::string& param, const json& v, const char* expected) {
  bad_request(param, std::string("expected ") + expected + ", got " + type_name(v));
}

inline double number(const json& v, const std::string& param) {
  if (!v.is_number()) wrong_type(param, v, "a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_request(param, "must be finite");
  return d;
}

inline float real(const json& v, const std::string& param) {
  const double d = number(v, param);
  if (std::fabs(d) > std::numeric_limits<float>::max()) bad_request(param, "out of range");
  return static_cast<float>(d);
}

inline std::int64_t integer(const json& v, const std::string& param, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number()) wrong_type(param, v, "an integer");
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d == std::floor(d)) || !(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)))
      bad_request(param, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<std::int64_t>(d);
  }
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad_request(param, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const std::int64_t i =
      v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>()) : v.get<std::int64_t>();
  if (i < lo || i > hi)
    bad_request(param, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return i;
}

inline int int32(const json& v, const std::string& param, std::int64_t lo = std::numeric_limits<int>::min(),
                 std::int64_t hi = std::numeric_limits<int>::max()) {
  return static_cast<int>(integer(v, param, lo, hi));
}

inline bool boolean(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, v, "a boolean");
  return v.get<bool>();
}

inline std::string string(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, v, "a string");
  return v.get<std::string>();
}

inline std::vector<std::int32_t> token_ids(const json& v, const std::string& param, const limits& lim) {
  if (!v.is_array()) wrong_type(param, v, "an array of token ids");
  if (v.size() > lim.max_items) bad_request(param, "more than " + std::to_string(lim.max_items) + " entries");
  std::vector<std::int32_t> ids;
  ids.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    ids.push_back(int32(v[i], param + "[" + std::to_string(i) + "]", 0));
  return ids;
}

inline std::vector<std::string> strings(const json& v, const std::string& param, std::size_t max_count) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > max_count) bad_request(param, "at most " + std::to_string(max_count) + " entries");
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(string(v[i], param + "[" + std::to_string(i) + "]"));
  } else {
    wrong_type(param, v, "a string or an array of strings");
  }
  for (const std::string& s : out)
    if (s.empty()) bad_request(param, "an empty string");
  return out;
}

inline engine_order preset(const json& v, const std::string& param) {
  const std::string s = string(v, param);
  for (const nucleus::detail::engine_order_info& e : nucleus::detail::engine_orders)
    if (s == e.name) return e.order;
  bad_request(param, "must be one of nucleus, vllm, hf, llama_cpp");
}

// A knob the table (engine/knobs.hpp) carries at `place`, parsed into r; false if `key` is none.
// Numbers are checked against the table's range here, so the error names the request's own field.
inline bool table_knob(const std::string& key, const json& v, json_place place, const std::string& param,
                       generation_request& r, const limits& lim) {
  const knob* k = find_knob(key);
  if (!k || k->place != place) return false;
  sampling_params& p = r.params;
  switch (k->kind) {
    case knob_kind::real:
    case knob_kind::integer: {
      const double x = k->kind == knob_kind::real ? double(real(v, param)) : double(int32(v, param));
      if (!k->in_range(x)) bad_request(param, k->rule);
      k->set(p, x);
      return true;
    }
    case knob_kind::token_ids:
      (key == "allowed_token_ids" ? p.allowed_token_ids : p.banned_token_ids) = token_ids(v, param, lim);
      return true;
    case knob_kind::breakers:  // strings: the server tokenizes them with the model's vocabulary
      r.dry_breakers = strings(v, param, lim.max_breakers);
      return true;
    case knob_kind::mode: {
      const std::string m = string(v, param);
      if (m == "raw")
        p.logprobs_mode = logprob_mode::raw;
      else if (m == "processed")
        p.logprobs_mode = logprob_mode::processed;
      else
        bad_request(param, k->rule);
      return true;
    }
    case knob_kind::bias:  // the request's own shapes: parse_request reads these
    case knob_kind::seed:
    case knob_kind::logprobs:
      return false;
  }
  return false;
}

// The nucleus-only knobs, under "nucleus": {...}; each named "nucleus.FIELD" in errors.
inline void parse_extension(const json& ext, generation_request& r, const limits& lim) {
  if (!ext.is_object()) wrong_type("nucleus", ext, "an object");
  for (const auto& [key, v] : ext.items()) {
    const std::string param = "nucleus." + key;
    if (key == "preset")
      r.order = preset(v, param);
    else if (key == "ignore_eos")
      r.ignore_eos = boolean(v, param);
    else if (!table_knob(key, v, json_place::extension, param, r, lim))
      bad_request(param, "unknown field");
  }
}

inline std::vector<chat_message> messages(const json& v, const limits& lim) {
  if (!v.is_array()) wrong_type("messages", v, "an array of messages");
  if (v.empty()) bad_request("messages", "must hold at least one message");
  if (v.size() > lim.max_items)
    bad_request("messages", "more than " + std::to_string(lim.max_items) + " messages");
  std::vector<chat_message> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) wrong_type(param, m, "an object");
    chat_message msg;
    for (const auto& [key, f] : m.items()) {
      if (key == "role")
        msg.role = string(f, param + ".role");
      else if (key == "content") {
        if (f.is_string()) {
          msg.content = f.get<std::string>();
        } else if (f.is_array()) {  // [{"type": "text", "text": ...}, ...]
          for (std::size_t k = 0; k < f.size(); ++k) {
            const std::string part = param + ".content[" + std::to_string(k) + "]";
            if (!f[k].is_object() || !f[k].contains("type") || f[k]["type"] != "text" ||
                !f[k].contains("text"))
              bad_request(part, "only parts of type text are supported");
            msg.content += string(f[k]["text"], part + ".text");
          }
        } else {
          wrong_type(param + ".content", f, "a string or an array of text parts");
        }
      } else if (key == "name") {
        string(f, param + ".name");
      } else {
        bad_request(param + "." + key, "unknown field");
      }
    }
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "developer")
      bad_request(param + ".role", "must be system, developer, user or assistant");
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace detail

// Parses one request body for `kind`. Throws api_error (400, naming the parameter) for malformed
// JSON, wrong types, out-of-range values and unknown fields. The sampler's own validation runs
// later, when the server builds it (sampler_error maps its message to the same kind of error).
inline generation_request parse_request(std::string_view body, endpoint kind, const limits& lim = {}) {
  using namespace detail;
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {  // a syntax error, or a number too large for a double (406)
    throw api_error(400, "", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw api_error(400, "", "the request body must be a JSON object");
  generation_request r;
  r.kind = kind;
  sampling_params& p = r.params;
  bool have_prompt = false;
  const json* logprobs = nullptr;
  const json* top_logprobs = nullptr;
  for (const auto& [key, v] : j.items()) {
    const bool chat = kind == endpoint::chat;
    if (key == "model")
      string(v, key);  // one model is served: any name is accepted
    else if (key == "prompt" && !chat) {
      have_prompt = true;
      if (v.is_string())
        r.prompt = v.get<std::string>();
      else if (v.is_array() && !v.empty() && v[0].is_string() && v.size() == 1)
        r.prompt = v[0].get<std::string>();
      else if (v.is_array())
        r.prompt = token_ids(v, key, lim);
      else
        wrong_type(key, v, "a string or an array of token ids");
    } else if (key == "messages" && kind != endpoint::completions) {
      r.messages = messages(v, lim);
      have_prompt = true;
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
      if (!v.is_null()) r.max_tokens = int32(v, key, 1);
    } else if (key == "seed") {
      if (!v.is_null())
        r.seed = static_cast<std::uint64_t>(integer(v, key, std::numeric_limits<std::int64_t>::min(),
                                                    std::numeric_limits<std::int64_t>::max()));
    } else if (key == "n")
      r.n = int32(v, key, 1, lim.max_n);
    else if (key == "stop") {
      if (!v.is_null()) r.stop = strings(v, key, lim.max_stop);
    } else if (key == "logprobs")
      logprobs = &v;
    else if (key == "top_logprobs" && chat)
      top_logprobs = &v;
    else if (key == "echo" && kind == endpoint::completions)
      r.echo = boolean(v, key);
    else if (key == "logit_bias") {
      if (v.is_null()) continue;
      if (!v.is_object()) wrong_type(key, v, "an object of token id -> bias");
      if (v.size() > lim.max_items)
        bad_request(key, "more than " + std::to_string(lim.max_items) + " entries");
      for (const auto& [id, b] : v.items()) {
        const std::string param = "logit_bias." + id;
        std::size_t used = 0;
        long long t = -1;
        try {
          t = std::stoll(id, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != id.size() || t < 0 || t > std::numeric_limits<std::int32_t>::max())
          bad_request(param, "keys must be token ids");
        const float bias = real(b, param);
        if (bias < -100.0f || bias > 100.0f) bad_request(param, "must be in [-100, 100]");
        p.logit_bias.push_back({static_cast<std::int32_t>(t), bias});
      }
    } else if (key == "stream" && kind != endpoint::distribution)
      r.stream = v.is_null() ? false : boolean(v, key);
    else if (key == "stream_options" && kind != endpoint::distribution) {
      if (v.is_null()) continue;
      if (!v.is_object()) wrong_type(key, v, "an object");
      for (const auto& [k2, f] : v.items()) {
        if (k2 == "include_usage")
          r.include_usage = boolean(f, "stream_options.include_usage");
        else
          bad_request("stream_options." + k2, "unknown field");
      }
    } else if (key == "user") {
      if (!v.is_null()) string(v, key);
    } else if (key == "best_of" && kind == endpoint::completions) {
      if (!v.is_null() && int32(v, key, 1) != r.n && int32(v, key, 1) != 1)
        bad_request(key, "only best_of = 1 (or equal to n) is supported");
    } else if (key == "suffix" && kind == endpoint::completions) {
      if (!v.is_null()) bad_request(key, "not supported");
    } else if (key == "top" && kind == endpoint::distribution)
      r.top = int32(v, key, 1, 100);
    else if (key == "nucleus")
      parse_extension(v, r, lim);
    else if (!table_knob(key, v, json_place::top, key, r, lim))
      bad_request(key, "unknown field");
  }
  if (!have_prompt) bad_request(kind == endpoint::chat ? "messages" : "prompt", "required");
  if (r.kind == endpoint::distribution && !r.messages.empty() && j.contains("prompt"))
    bad_request("messages", "give either prompt or messages");
  // Completions: logprobs is the count of alternatives. Chat: logprobs is a boolean, top_logprobs the count.
  if (kind == endpoint::chat) {
    const bool on = logprobs && !logprobs->is_null() && boolean(*logprobs, "logprobs");
    if (top_logprobs && !top_logprobs->is_null()) {
      const int k = int32(*top_logprobs, "top_logprobs", 0, lim.max_logprobs);
      if (!on) bad_request("top_logprobs", "requires logprobs: true");
      r.logprobs = k;
    } else if (on) {
      r.logprobs = 0;
    }
  } else if (logprobs && !logprobs->is_null()) {
    r.logprobs = int32(*logprobs, "logprobs", 0, lim.max_logprobs);
  }
  p.logprobs = r.logprobs;
  if (r.seed) p.seed = *r.seed;
  return r;
}

// The parameter a sampler's std::invalid_argument names ("nucleus::sampling_params.FIELD: ..."), as
// a request calls it: top-level for the OpenAI/vLLM fields, "nucleus.FIELD" for the extension's.
inline api_error sampler_error(const std::invalid_argument& e) {
  const std::string what = e.what();
  const std::string prefix = "nucleus::sampling_params.";
  std::string field;
  std::string message = what;
  if (what.rfind(prefix, 0) == 0) {
    const std::size_t colon = what.find(':', prefix.size());
    field =
        what.substr(prefix.size(), colon == std::string::npos ? std::string::npos : colon - prefix.size());
    if (colon != std::string::npos) message = what.substr(colon + 2);
  }
  // Where the table carries the field: at the top level, or in the "nucleus" extension.
  const knob* k = find_knob(field);
  const bool top = field.empty() || (k && k->place == json_place::top);
  const std::string param = top ? field : "nucleus." + field;
  return api_error(400, param, param.empty() ? message : param + ": " + message);
}

}  // namespace nucleus::server
