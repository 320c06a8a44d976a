// The cluster report as Markdown tables, for reading without tools: what the JSON report
// holds, in the same order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fakegpu::coord {

std::string report_markdown(const nlohmann::json& report);
// "512 B", "1.5 MiB": a byte count as people read it.
std::string bytes_text(double bytes);

}  // namespace fakegpu::coord
