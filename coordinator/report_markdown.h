// The cluster report as Markdown tables, for reading without tools: what the JSON report
// holds, in the same order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fakegpu::coord {

std::string report_markdown(const nlohmann::json& report);

}  // namespace fakegpu::coord
