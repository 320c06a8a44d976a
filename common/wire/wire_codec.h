// How a message's fields become bytes and back: little-endian integers, IEEE doubles, strings
// and lists prefixed with their u32 length. Writer and Reader are the two visitors of the field
// lists in wire.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace fakegpu::wire {

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every message lists its fields once, in wire order, in a static member template
//   template <typename Self, typename Visit> static void fields(Self& m, Visit& v)
// that calls v("name", m.field) for each field. Writer and Reader are the two visitors: the
// same list encodes (Self is const) and decodes. Field types: uint8_t, int32_t, uint32_t,
// uint64_t, double, std::string, fixed byte arrays, enums (each with an enum_count(E) overload
// giving how many values it has), nested structs with their own fields(), and lists
// (std::vector) of int32_t or of such structs; a list may name its largest accepted size.
// v.check(ok, "field", "what") rejects a decoded value that makes no sense; the Writer ignores
// it.

// Little-endian field encoder.
class Writer {
 public:
  static constexpr bool kReading = false;
  Writer() { bytes_.reserve(128); }  // every fixed-field message but Hello's strings fits
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { put(v); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) { put(v); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put(bits);
  }
  void str(const std::string& s);
  void raw(const void* data, size_t n);
  void i32_list(const std::vector<int32_t>& v);
  std::vector<uint8_t>& bytes() { return bytes_; }

  // The field visitor.
  void operator()(const char*, uint8_t v) { u8(v); }
  void operator()(const char*, int32_t v) { i32(v); }
  void operator()(const char*, uint32_t v) { u32(v); }
  void operator()(const char*, uint64_t v) { u64(v); }
  void operator()(const char*, double v) { f64(v); }
  void operator()(const char*, const std::string& s) { str(s); }
  void operator()(const char*, const std::vector<int32_t>& v) { i32_list(v); }
  template <size_t N>
  void operator()(const char*, const uint8_t (&bytes)[N]) { raw(bytes, N); }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  void operator()(const char*, E e) { put(static_cast<std::underlying_type_t<E>>(e)); }
  template <typename T>
  auto operator()(const char*, const T& nested) -> decltype(T::fields(nested, *this), void()) {
    T::fields(nested, *this);
  }
  template <typename T>
  void operator()(const char*, const std::vector<T>& list, uint32_t /*max_items*/ = UINT32_MAX) {
    u32(static_cast<uint32_t>(list.size()));
    for (const T& item : list) T::fields(item, *this);
  }
  void check(bool, const char*, const char*) {}

 private:
  template <typename T>
  void put(T v) {
    uint8_t le[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes_.insert(bytes_.end(), le, le + sizeof(T));
  }
  std::vector<uint8_t> bytes_;
};

// Bounds-checked decoder; every read past the end throws WireError, and so does a field value
// the message cannot carry, naming the message and the field.
class Reader {
 public:
  static constexpr bool kReading = true;
  // what: the message being read, for error messages.
  Reader(const uint8_t* data, size_t size, const char* what = "frame") : data_(data), size_(size), what_(what) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return static_cast<int32_t>(get<uint32_t>()); }
  uint64_t u64() { return get<uint64_t>(); }
  double f64() {
    uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str();
  void raw(void* out, size_t n);
  std::vector<int32_t> i32_list();
  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  // The field visitor.
  void operator()(const char*, uint8_t& v) { v = u8(); }
  void operator()(const char*, int32_t& v) { v = i32(); }
  void operator()(const char*, uint32_t& v) { v = u32(); }
  void operator()(const char*, uint64_t& v) { v = u64(); }
  void operator()(const char*, double& v) { v = f64(); }
  void operator()(const char*, std::string& s) { s = str(); }
  void operator()(const char*, std::vector<int32_t>& v) { v = i32_list(); }
  template <size_t N>
  void operator()(const char*, uint8_t (&bytes)[N]) { raw(bytes, N); }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  void operator()(const char* name, E& e) {
    const auto value = get<std::underlying_type_t<E>>();
    // Loading a value outside the enum's list would be a bug waiting to happen: reject it here.
    if (value >= enum_count(E{})) fail(name, "has unknown value " + std::to_string(value));
    e = static_cast<E>(value);
  }
  template <typename T>
  auto operator()(const char* name, T& nested) -> decltype(T::fields(nested, *this), void()) {
    Scope scope(*this, name, kNoItem);
    T::fields(nested, *this);
  }
  template <typename T>
  void operator()(const char* name, std::vector<T>& list, uint32_t max_items = UINT32_MAX) {
    const uint32_t n = u32();
    if (n > max_items)
      fail(name, "has " + std::to_string(n) + " items, more than the " + std::to_string(max_items) + " allowed");
    list.clear();
    for (uint32_t i = 0; i < n; ++i) {
      Scope scope(*this, name, i);
      T::fields(list.emplace_back(), *this);
    }
  }
  void check(bool ok, const char* name, const char* what) {
    if (!ok) fail(name, what);
  }

 private:
  static constexpr uint32_t kNoItem = UINT32_MAX;
  // The nested struct or list item being read, so an error can name where it is.
  class Scope {
   public:
    Scope(Reader& r, const char* outer, uint32_t item) : r_(r), outer_(r.outer_), item_(r.item_) {
      r.outer_ = outer;
      r.item_ = item;
    }
    ~Scope() {
      r_.outer_ = outer_;
      r_.item_ = item_;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Reader& r_;
    const char* outer_;
    uint32_t item_;
  };
  [[noreturn]] void fail(const char* field, const std::string& problem) const;

  template <typename T>
  T get() {
    need(sizeof(T));
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T(data_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    return v;
  }
  void need(size_t n) const;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const char* what_;
  const char* outer_ = nullptr;
  uint32_t item_ = kNoItem;
};

}  // namespace fakegpu::wire
