#include "byte_count.h"

#include <cctype>

namespace fakegpu {

std::optional<uint64_t> parse_byte_count(const std::string& text) {
  size_t at = 0;
  uint64_t n = 0;
  for (; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at) {
    const uint64_t digit = static_cast<uint64_t>(text[at] - '0');
    if (n > (UINT64_MAX - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  if (at == 0) return std::nullopt;
  int shift = 0;
  if (at < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[at++]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return std::nullopt;
    }
  }
  if (at != text.size() || n > (UINT64_MAX >> shift)) return std::nullopt;
  return n << shift;
}

}  // namespace fakegpu
