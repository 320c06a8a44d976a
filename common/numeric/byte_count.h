// Byte counts as settings spell them: "4096", "64K", "1G" (binary multiples, either case).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fakegpu {

// The count the text spells, or nullopt when it spells none (empty, a sign, another suffix,
// trailing text, or more than 64 bits).
std::optional<uint64_t> parse_byte_count(const std::string& text);

}  // namespace fakegpu
