// The table of docs/usage.md, printed from the declarations (fakegpu-coordinator --env-table).
#include "env.h"

namespace fakegpu::env {

std::string markdown_table() {
  std::string table = "| variable | meaning |\n|---|---|\n";
  std::string names, doc;
  auto end_row = [&] {
    if (!names.empty()) table += "| " + names + " | " + doc + " |\n";
  };
  for (const Declaration* d = begin_declarations(); d != end_declarations(); ++d) {
    const std::string name = std::string("`") + d->name + "`";
    if (*d->doc) {  // a new row; an empty doc joins the one above
      end_row();
      names = name;
      doc = d->doc;
    } else {
      names += ", " + name;
    }
  }
  end_row();
  return table;
}

}  // namespace fakegpu::env
