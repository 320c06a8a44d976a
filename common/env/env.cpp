#include "env.h"

#include <strings.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <vector>

#include "byte_count.h"

namespace fakegpu::env {
namespace {

constexpr Declaration kDeclarations[] = {
#define FAKEGPU_TEXT(handle, name, fallback, readers, doc) {name, Kind::kText, fallback, "", 0, 0, readers, doc},
#define FAKEGPU_CHOICE(handle, name, fallback, choices, readers, doc) \
  {name, Kind::kChoice, fallback, choices, 0, 0, readers, doc},
#define FAKEGPU_FLAG(handle, name, fallback, readers, doc) {name, Kind::kFlag, fallback, "", 0, 0, readers, doc},
#define FAKEGPU_INTEGER(handle, name, fallback, min, max, readers, doc) \
  {name, Kind::kInteger, fallback, "", min, max, readers, doc},
#define FAKEGPU_BYTES(handle, name, fallback, min, readers, doc) \
  {name, Kind::kBytes, fallback, "", min, INT64_MAX, readers, doc},
#define FAKEGPU_MILLISECONDS(handle, name, fallback, readers, doc) \
  {name, Kind::kMilliseconds, fallback, "", 1, INT64_MAX, readers, doc},
#include "env.def"
};
static_assert(std::size(kDeclarations) == static_cast<size_t>(Id::kCount), "one declaration per handle");

// NCCL matches the words of its own variables in any case (NCCL_DEBUG=info); ours are exact.
bool nccl_variable(const Declaration& d) { return std::string(d.name).rfind("NCCL_", 0) == 0; }

std::optional<int64_t> parse_integer(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return n;
}

std::optional<bool> parse_flag(const std::string& text) {
  for (const char* yes : {"1", "true", "yes", "on"})
    if (!strcasecmp(text.c_str(), yes)) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (!strcasecmp(text.c_str(), no)) return false;
  return std::nullopt;
}

// The choice `text` names, spelled as declared.
std::optional<std::string> parse_choice(const Declaration& d, const std::string& text) {
  const std::string choices = d.choices;
  for (size_t start = 0; start <= choices.size();) {
    size_t bar = choices.find('|', start);
    if (bar == std::string::npos) bar = choices.size();
    const std::string choice = choices.substr(start, bar - start);
    if (choice == text || (nccl_variable(d) && !strcasecmp(choice.c_str(), text.c_str()))) return choice;
    start = bar + 1;
  }
  return std::nullopt;
}

std::string bounds(const Declaration& d) {
  if (d.max == INT64_MAX) return "of at least " + std::to_string(d.min);
  return "from " + std::to_string(d.min) + " to " + std::to_string(d.max);
}

// What a variable of this declaration accepts, for the error message.
std::string accepted(const Declaration& d) {
  switch (d.kind) {
    case Kind::kText: return "any text";
    case Kind::kChoice: {
      std::string list = d.choices;
      for (size_t bar; (bar = list.find('|')) != std::string::npos;) list.replace(bar, 1, ", ");
      return "one of " + list;
    }
    case Kind::kFlag: return "1 or 0 (or true/false, yes/no, on/off)";
    case Kind::kInteger: return "a whole number " + bounds(d);
    case Kind::kBytes: return "a byte count " + bounds(d) + " (a number, optionally with K, M or G)";
    case Kind::kMilliseconds: return "a whole number of milliseconds above 0";
  }
  return "";
}

std::optional<Value> parse_as_declared(const Declaration& d, const std::string& text) {
  auto in_bounds = [&](int64_t n) { return n >= d.min && n <= d.max; };
  switch (d.kind) {
    case Kind::kText: return Value(text);
    case Kind::kChoice:
      if (auto choice = parse_choice(d, text)) return Value(*choice);
      break;
    case Kind::kFlag:
      if (auto flag = parse_flag(text)) return Value(*flag);
      break;
    case Kind::kInteger:
      if (auto n = parse_integer(text); n && in_bounds(*n)) return Value(*n);
      break;
    case Kind::kBytes:
      if (auto n = parse_byte_count(text); n && *n >= static_cast<uint64_t>(d.min)) return Value(*n);
      break;
    case Kind::kMilliseconds:
      if (auto n = parse_integer(text); n && in_bounds(*n)) return Value(std::chrono::milliseconds(*n));
      break;
  }
  return std::nullopt;
}

// A setting as this process's environment gives it: its value, or why it has none.
struct Parsed {
  std::optional<Value> value;
  std::string error;
  bool set = false;  // the environment spells a value (else the default, if any, holds)
};

// Filled on first use and never freed, so that reading a setting takes no lock: gethostname(),
// which the stub answers from FAKEGPU_HOSTNAME, may run anywhere, even in a child forked while
// another thread was reading one.
std::atomic<const Parsed*> g_parsed[static_cast<size_t>(Id::kCount)];

}  // namespace

const Declaration& declaration(Id id) { return kDeclarations[static_cast<size_t>(id)]; }
const Declaration* begin_declarations() { return std::begin(kDeclarations); }
const Declaration* end_declarations() { return std::end(kDeclarations); }

std::optional<Value> parse(const Declaration& d, const char* text) {
  const bool set = text && *text;
  if (!set && !*d.fallback) return std::nullopt;
  const std::string spelled = set ? text : d.fallback;
  if (std::optional<Value> v = parse_as_declared(d, spelled)) return v;
  throw SettingError(std::string(d.name) + "=" + spelled + ": expected " + accepted(d));
}

namespace {

const Parsed& parsed(Id id) {
  std::atomic<const Parsed*>& slot = g_parsed[static_cast<size_t>(id)];
  const Parsed* p = slot.load(std::memory_order_acquire);
  if (!p) {
    auto* fresh = new Parsed;
    const char* text = std::getenv(declaration(id).name);
    fresh->set = text && *text;
    try {
      fresh->value = parse(declaration(id), text);
    } catch (const SettingError& e) {
      fresh->error = e.what();
    }
    p = fresh;
    const Parsed* first = nullptr;
    if (!slot.compare_exchange_strong(first, fresh, std::memory_order_acq_rel)) {  // another thread was first
      delete fresh;
      p = first;
    }
  }
  return *p;
}

}  // namespace

std::optional<Value> lookup(Id id) {
  const Parsed& p = parsed(id);
  if (!p.error.empty()) throw SettingError(p.error);
  return p.value;
}

bool is_set(Id id) { return parsed(id).set; }

void assign(Id id, const std::string& text) {
  if (text.empty())
    unsetenv(declaration(id).name);
  else
    setenv(declaration(id).name, text.c_str(), 1);
  // Threads may still hold the old value: it is kept, where leak checkers can see it.
  static std::mutex mu;
  static auto* replaced = new std::vector<const Parsed*>;
  std::lock_guard<std::mutex> lock(mu);
  if (const Parsed* old = g_parsed[static_cast<size_t>(id)].exchange(nullptr)) replaced->push_back(old);
}

void check(Reader reader) {
  for (size_t i = 0; i < std::size(kDeclarations); ++i)
    if (kDeclarations[i].readers & reader) lookup(static_cast<Id>(i));
}

std::string foreign(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace fakegpu::env
