#include "wire_codec.h"

namespace fakegpu::wire {

void Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  raw(s.data(), s.size());
}

void Writer::raw(const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  bytes_.insert(bytes_.end(), p, p + n);
}

void Writer::i32_list(const std::vector<int32_t>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (int32_t x : v) i32(x);
}

void Reader::need(size_t n) const {
  if (n > size_ - pos_)
    throw WireError(std::string("truncated ") + what_ + ": needed " + std::to_string(n) + " more bytes at offset " +
                    std::to_string(pos_) + " of " + std::to_string(size_));
}

void Reader::fail(const char* field, const std::string& problem) const {
  std::string where = std::string(what_) + " field ";
  if (outer_) {
    where += outer_;
    if (item_ != kNoItem) where += "[" + std::to_string(item_) + "]";
    where += ".";
  }
  throw WireError(where + field + " " + problem);
}

std::string Reader::str() {
  uint32_t n = u32();
  need(n);
  std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return s;
}

std::vector<int32_t> Reader::i32_list() {
  uint32_t n = u32();
  need(size_t{n} * 4);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = i32();
  return v;
}

void Reader::raw(void* out, size_t n) {
  need(n);
  std::memcpy(out, data_ + pos_, n);
  pos_ += n;
}

}  // namespace fakegpu::wire
