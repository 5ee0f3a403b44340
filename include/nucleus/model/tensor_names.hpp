// Tensor names of a Llama-family decoder in GGUF and Hugging Face layouts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nucleus::model {

// Tensor names of a Llama-family decoder in the two layouts nucleus loads. Both store a projection as
// [out_features, in_features] once GGUF's ne[] is reversed, so only the names differ.
struct gguf_names {
  static constexpr std::string_view embedding = "token_embd.weight";
  static constexpr std::string_view output_norm = "output_norm.weight";
  static constexpr std::string_view output = "output.weight";
  static constexpr std::string_view attn_norm = "attn_norm.weight";
  static constexpr std::string_view q = "attn_q.weight";
  static constexpr std::string_view k = "attn_k.weight";
  static constexpr std::string_view v = "attn_v.weight";
  static constexpr std::string_view q_bias = "attn_q.bias";
  static constexpr std::string_view k_bias = "attn_k.bias";
  static constexpr std::string_view v_bias = "attn_v.bias";
  static constexpr std::string_view q_norm = "attn_q_norm.weight";
  static constexpr std::string_view k_norm = "attn_k_norm.weight";
  static constexpr std::string_view o = "attn_output.weight";
  static constexpr std::string_view ffn_norm = "ffn_norm.weight";
  static constexpr std::string_view gate = "ffn_gate.weight";
  static constexpr std::string_view up = "ffn_up.weight";
  static constexpr std::string_view down = "ffn_down.weight";

  static std::string layer(std::int64_t i, std::string_view leaf) {
    return "blk." + std::to_string(i) + "." + std::string(leaf);
  }
};

struct hf_names {
  static constexpr std::string_view embedding = "model.embed_tokens.weight";
  static constexpr std::string_view output_norm = "model.norm.weight";
  static constexpr std::string_view output = "lm_head.weight";
  static constexpr std::string_view attn_norm = "input_layernorm.weight";
  static constexpr std::string_view q = "self_attn.q_proj.weight";
  static constexpr std::string_view k = "self_attn.k_proj.weight";
  static constexpr std::string_view v = "self_attn.v_proj.weight";
  static constexpr std::string_view q_bias = "self_attn.q_proj.bias";
  static constexpr std::string_view k_bias = "self_attn.k_proj.bias";
  static constexpr std::string_view v_bias = "self_attn.v_proj.bias";
  static constexpr std::string_view q_norm = "self_attn.q_norm.weight";
  static constexpr std::string_view k_norm = "self_attn.k_norm.weight";
  static constexpr std::string_view o = "self_attn.o_proj.weight";
  static constexpr std::string_view ffn_norm = "post_attention_layernorm.weight";
  static constexpr std::string_view gate = "mlp.gate_proj.weight";
  static constexpr std::string_view up = "mlp.up_proj.weight";
  static constexpr std::string_view down = "mlp.down_proj.weight";

  static std::string layer(std::int64_t i, std::string_view leaf) {
    return "model.layers." + std::to_string(i) + "." + std::string(leaf);
  }
};

}  // namespace nucleus::model
