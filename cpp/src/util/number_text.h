// A double as a person writes it in a message: "-1", "0.5", "1e+30", "nan" (internal).
#pragma once

#include <sstream>
#include <string>

namespace shardfeed {

inline std::string NumberText(double v) {
  std::ostringstream out;
  out << v;  // shortest of fixed and scientific, 6 significant digits
  return out.str();
}

}  // namespace shardfeed
