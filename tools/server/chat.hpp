// Chat messages to prompt text through the model's template. nucleus renders ChatML, the format of
// SmolLM2 (and Qwen): it reads tokenizer.chat_template from the GGUF, checks that it is ChatML, and
// takes the default system message the template inserts when the first message is not one.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "api.hpp"

namespace nucleus::server {

class chat_template {
 public:
  // `source`: the GGUF's tokenizer.chat_template, if any. Without one, ChatML with no default system.
  explicit chat_template(const std::optional<std::string>& source) {
    if (!source) return;
    if (source->find("<|im_start|>") == std::string::npos) {
      chatml_ = false;
      return;
    }
    // SmolLM2's template: {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
    // ...<|im_end|>' }}: the text between those markers is the default system message.
    constexpr std::string_view head = "<|im_start|>system\n";
    const std::size_t at = source->find(head);
    if (at != std::string::npos && source->find("!= 'system'") != std::string::npos) {
      const std::size_t begin = at + head.size();
      const std::size_t end = source->find("<|im_end|>", begin);
      if (end != std::string::npos) default_system_ = source->substr(begin, end - begin);
    }
  }

  bool supported() const noexcept { return chatml_; }
  const std::optional<std::string>& default_system() const noexcept { return default_system_; }

  std::string render(std::span<const chat_message> messages, bool add_generation_prompt = true) const {
    std::string out;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const std::string role = messages[i].role == "developer" ? "system" : messages[i].role;
      if (i == 0 && role != "system" && default_system_)
        out.append("<|im_start|>system\n").append(*default_system_).append("<|im_end|>\n");
      out.append("<|im_start|>").append(role).append("\n").append(messages[i].content).append("<|im_end|>\n");
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
  }

 private:
  bool chatml_ = true;
  std::optional<std::string> default_system_;
};

}  // namespace nucleus::server
