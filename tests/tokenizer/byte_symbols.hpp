// GPT-2's byte-to-unicode table for the tokenizer tests, written independently of the header.
#pragma once

#include <string>
#include <vector>

namespace nucleus_test {

// GPT-2's byte-to-unicode table, written independently of the header: printable Latin-1 bytes
// stand for themselves, the other 68 take U+0100.. in byte order.
inline std::string byte_symbol(int b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
      const int cpt = printable ? c : next++;
      std::string s;
      if (cpt < 0x80) {
        s += static_cast<char>(cpt);
      } else {
        s += static_cast<char>(0xc0 | (cpt >> 6));
        s += static_cast<char>(0x80 | (cpt & 0x3f));
      }
      t[c] = s;
    }
    return t;
  }();
  return table[b];
}

}  // namespace nucleus_test
