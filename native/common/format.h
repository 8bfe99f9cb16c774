// Small formatting helpers shared by error messages: shapes print as [2, 3].
#pragma once
#include <sstream>
#include <string>

namespace dtorch::common {

template <typename Container>
std::string formatList(const Container& values) {
  std::ostringstream os;
  os << '[';
  bool first = true;
  for (const auto& v : values) {
    if (!first) os << ", ";
    os << v;
    first = false;
  }
  os << ']';
  return os.str();
}

}  // namespace dtorch::common
