// Settings from the environment: every variable fakegpu reads is declared once in env.def,
// with its type, default and documentation, and read through a typed handle:
//
//   uint64_t chunk = env::get(env::kStagingChunkBytes);          // "64K" -> 65536
//   std::optional<uint64_t> limit = env::find(env::kCoordinatorMaxBuffer);
//
// Each variable is parsed the first time it is asked for and kept for the life of the process,
// from any thread (assign() changes it). A malformed value throws SettingError, at every ask,
// with a message naming the variable, its value and what is accepted; an empty value counts as
// unset.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

namespace fakegpu::env {

// Which programs read a variable (bits). The C++ ones check all of theirs as they start
// (check()); the Python ones read their few themselves.
enum Reader : unsigned {
  kLauncher = 1,     // fgpu (fakegpu/*.py); declared here so that the docs' table is complete
  kPythonHook = 2,   // the rank's sitecustomize and torch hook
  kCoordinator = 4,  // fakegpu-coordinator, and fakegpu-model for the NCCL_* tuning variables
  kStub = 8,         // libnccl.so.2 in a rank
  kRuntime = 16,     // the fake libcudart in a rank
  kHybridShim = 32,  // libfakegpu-hybrid-devices.so in a hybrid-mode rank
};

enum class Kind { kText, kChoice, kFlag, kInteger, kBytes, kMilliseconds };

struct Declaration {
  const char* name;
  Kind kind;
  const char* fallback;  // the default as a user would write it; "" when there is none
  const char* choices;   // kChoice: "a|b|c"
  int64_t min, max;      // kInteger: both bounds; kBytes: min only
  unsigned readers;      // Reader bits
  const char* doc;       // Markdown for the docs' table; "" shares the row above
};

class SettingError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Id : int {
#define FAKEGPU_TEXT(handle, ...) handle,
#define FAKEGPU_CHOICE(handle, ...) handle,
#define FAKEGPU_FLAG(handle, ...) handle,
#define FAKEGPU_INTEGER(handle, ...) handle,
#define FAKEGPU_BYTES(handle, ...) handle,
#define FAKEGPU_MILLISECONDS(handle, ...) handle,
#include "env.def"
  kCount
};

// A variable, with the C++ type its value has.
template <typename T>
struct Setting {
  Id id;
};

#define FAKEGPU_TEXT(handle, ...) inline constexpr Setting<std::string> handle{Id::handle};
#define FAKEGPU_CHOICE(handle, ...) inline constexpr Setting<std::string> handle{Id::handle};
#define FAKEGPU_FLAG(handle, ...) inline constexpr Setting<bool> handle{Id::handle};
#define FAKEGPU_INTEGER(handle, ...) inline constexpr Setting<int64_t> handle{Id::handle};
#define FAKEGPU_BYTES(handle, ...) inline constexpr Setting<uint64_t> handle{Id::handle};
#define FAKEGPU_MILLISECONDS(handle, ...) inline constexpr Setting<std::chrono::milliseconds> handle{Id::handle};
#include "env.def"

using Value = std::variant<std::string, bool, int64_t, uint64_t, std::chrono::milliseconds>;

const Declaration& declaration(Id id);
// Every declaration, in env.def's order.
const Declaration* begin_declarations();
const Declaration* end_declarations();

// What `text` (a variable's value; null or empty when unset) makes of the setting: the value
// it spells, else the default, else nothing. Reads no environment; throws SettingError.
std::optional<Value> parse(const Declaration& d, const char* text);

// The setting's value from this process's environment, parsed on first use.
std::optional<Value> lookup(Id id);

// The value set, else the default; nullopt when neither.
template <typename T>
std::optional<T> find(Setting<T> s) {
  std::optional<Value> v = lookup(s.id);
  if (!v) return std::nullopt;
  return std::get<T>(*v);
}

// The value set, else the default, else T's empty value (empty text, 0, false) for the
// settings whose readers decide what unset means.
template <typename T>
T get(Setting<T> s) {
  return find(s).value_or(T{});
}

// Whether this process's environment sets the variable (to a non-empty value), as first read.
bool is_set(Id id);

// Sets the variable (empty text: unsets it) for this process's later reads and for the
// processes it starts.
void assign(Id id, const std::string& text);
template <typename T>
void assign(Setting<T> s, const std::string& text) {
  assign(s.id, text);
}

// Parses every variable `reader` reads and throws the first SettingError, so that a malformed
// one stops the program as it starts instead of the first call that needs it.
void check(Reader reader);

// A variable fakegpu does not own (RANK, SLURM_PROCID: launchers' variables), or "" when
// unset; kept apart so that every read of the environment goes through this file.
std::string foreign(const char* name);

// The docs' table of the variables, as Markdown (docs/usage.md holds it between markers).
std::string markdown_table();

}  // namespace fakegpu::env
