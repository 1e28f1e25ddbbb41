#include "platforms/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "platforms/config_error.hpp"

namespace stepsim::platforms {

namespace {

// The byte offset of the first byte that is not valid UTF-8, or npos. YAML text is Unicode;
// yaml-cpp passes other bytes through, and its emitter would write them back differently.
std::size_t invalid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const std::size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return i;
    for (std::size_t k = 1; k < length; ++k)
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return i;
    // Overlong forms and surrogates are not UTF-8 either.
    const auto next = static_cast<unsigned char>(text[i + 1 < text.size() ? i + 1 : i]);
    if ((length == 2 && byte < 0xC2) || (length == 3 && byte == 0xE0 && next < 0xA0) ||
        (length == 3 && byte == 0xED && next >= 0xA0) || (length == 4 && byte == 0xF0 && next < 0x90) ||
        (length == 4 && byte > 0xF4) || (length == 4 && byte == 0xF4 && next >= 0x90))
      return i;
    i += length;
  }
  return std::string::npos;
}

}  // namespace

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

void YamlReader::apply_override(YAML::Node& root, const std::string& assignment, const std::string& label) {
  const std::string fix = "write -p KEY=VALUE, e.g. -p gpu.model=H100-SXM5-80GB, -p nodes=4 or -p fabric.kind=rail-optimized";
  std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == assignment.size())
    throw ConfigError(label, "not a KEY=VALUE assignment", fix);
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  if (const std::size_t at = invalid_utf8(assignment); at != std::string::npos)
    throw ConfigError(label, "byte " + std::to_string(at) + " is not UTF-8", "write the value in UTF-8");
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    std::size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  YAML::Node at = root;
  std::string path;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].empty()) throw ConfigError(label, "empty key segment", fix);
    path += (path.empty() ? "" : ".") + parts[i];
    // yaml-cpp nodes are references: `reset` moves the handle, plain assignment would overwrite.
    if (!at[parts[i]]) at[parts[i]] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = at[parts[i]];
    if (!next.IsMap())
      throw ConfigError(label, "'" + path + "' is not a section with keys",
                        "override a key inside a section, e.g. fabric.kind");
    at.reset(next);
  }
  if (parts.back().empty()) throw ConfigError(label, "empty key segment", fix);
  YAML::Node target = at[parts.back()];
  if (target && target.IsMap())
    throw ConfigError(label, "'" + key + "' is a section, not a single value",
                      "override one of its keys, e.g. " + key + ".NAME=VALUE");
  at[parts.back()] = value.front() == '[' ? flow_list(value, label) : YAML::Node(value);
  overrides_[key] = label;
}

YAML::Node YamlReader::flow_list(const std::string& value, const std::string& label) {
  // A list value (e.g. fabric.nccl_protocols=[Simple]) is read as a YAML flow sequence of scalars.
  const std::string fix = "write a list of plain values, e.g. -p fabric.nccl_protocols=[LL,Simple]";
  YAML::Node list;
  try {
    list = YAML::Load(value);
  } catch (const YAML::Exception& e) {
    throw ConfigError(label, "not a YAML list: " + e.msg, fix);
  }
  if (!list.IsSequence()) throw ConfigError(label, "not a YAML list", fix);
  for (const YAML::Node& item : list) {
    if (!item.IsScalar()) throw ConfigError(label, "a list item is not a plain value", fix);
    if (invalid_utf8(item.Scalar()) != std::string::npos)  // \N and \_ (check_scalar_text below)
      throw ConfigError(label, "an escape in a list item decodes to bytes that are not UTF-8", fix);
  }
  return list;
}

std::string YamlReader::where(const std::string& path, const YAML::Node& node) const {
  // A value set by an override names the flag, even where it replaced a value that has a line.
  for (std::string p = path;;) {
    auto it = overrides_.find(p);
    if (it != overrides_.end()) return origin_ + ": " + path + " (set by " + it->second + ")";
    if (const std::size_t bracket = p.rfind('['); !p.empty() && p.back() == ']' && bracket != std::string::npos) {
      p.resize(bracket);  // an item of an overridden list ("rows[0]")
      continue;
    }
    std::size_t dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p.resize(dot);
  }
  if (node && !node.Mark().is_null())
    return origin_ + ": " + path + " (line " + std::to_string(node.Mark().line + 1) + ")";
  return origin_ + ": " + path;
}

void YamlReader::fail(const std::string& path, const YAML::Node& node, const std::string& what,
                      const std::string& fix) const {
  throw ConfigError(where(path, node), what, fix);
}

namespace {

// The deepest node along dotted `path` under `root` that is present, and whether it is the end
// of the path. Lookups go through a const handle: a non-const operator[] inserts the key.
std::pair<YAML::Node, bool> walk(const YAML::Node& root, const std::string& path) {
  YAML::Node node = root;
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t dot = std::min(path.find('.', start), path.size());
    if (!node.IsMap()) return {node, false};
    const YAML::Node& map = node;
    const YAML::Node child = map[path.substr(start, dot - start)];
    if (!child) return {node, false};
    node.reset(child);  // reset rebinds; operator= would overwrite the document's node
    start = dot + 1;
  }
  return {node, true};
}

}  // namespace

void YamlReader::fail_at(const YAML::Node& root, const std::string& path, const std::string& what,
                         const std::string& fix) const {
  fail(path, walk(root, path).first, what, fix);
}

YAML::Node find_node(const YAML::Node& root, const std::string& path) {
  auto [node, whole_path] = walk(root, path);
  // Absent is an undefined node (false in a condition); YAML::Node() is a defined null (true).
  return whole_path ? node : YAML::Node(YAML::NodeType::Undefined);
}

void YamlReader::check_keys(const YAML::Node& map, const std::string& path,
                            const std::vector<std::string>& allowed) const {
  if (!map.IsMap()) fail(path, map, "expected a section of `key: value` entries", "allowed keys: " + join(allowed));
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string full = path.empty() ? key : path + "." + key;
      fail(full, entry.first, "unknown key '" + key + "'", "allowed keys here: " + join(allowed));
    }
  }
}

YAML::Node YamlReader::require(const YAML::Node& map, const std::string& path, const std::string& key) const {
  YAML::Node value = map[key];
  if (!value || value.IsNull()) {
    std::string full = path.empty() ? key : path + "." + key;
    fail(full, map, "missing required key '" + key + "'", "add `" + key + ": ...`");
  }
  return value;
}

std::string YamlReader::get_string(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) fail(path, node, "expected a single value", "write `" + path + ": VALUE`");
  return node.Scalar();
}

int YamlReader::get_int(const YAML::Node& node, const std::string& path, int min_value, int max_value) const {
  const std::string text = get_string(node, path);
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::invalid_argument || end != text.data() + text.size())
    fail(path, node, "'" + text + "' is not an integer", "write a whole number such as 8");
  if (ec == std::errc::result_out_of_range || value > max_value)
    fail(path, node, "must be at most " + std::to_string(max_value) + ", got " + text,
         "write a whole number from " + std::to_string(min_value) + " to " + std::to_string(max_value) +
             " (stepsim's limit)");
  if (value < min_value)
    fail(path, node, "must be >= " + std::to_string(min_value) + ", got " + text,
         "write a whole number >= " + std::to_string(min_value));
  return static_cast<int>(value);
}

double YamlReader::get_number(const YAML::Node& node, const std::string& path) const {
  std::string text = get_string(node, path);
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(value)) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    fail(path, node, "'" + text + "' is not a number", "write a number such as 19.5e12");
  }
  if (value < 0) fail(path, node, "must be >= 0, got " + text, "write a non-negative number");
  return value;
}

bool YamlReader::get_bool(const YAML::Node& node, const std::string& path) const {
  std::string text = get_string(node, path);
  if (text == "true") return true;
  if (text == "false") return false;
  fail(path, node, "'" + text + "' is not true or false", "write true or false");
}

BytesPerSecond YamlReader::get_bandwidth(const YAML::Node& node, const std::string& path) const {
  std::string text = get_string(node, path);
  BytesPerSecond value = 0;
  try {
    value = parse_bandwidth(text);
  } catch (const std::invalid_argument& e) {
    fail(path, node, e.what(), "write a bandwidth per direction such as 25GBps or 200Gbps");
  }
  if (!(value > 0)) fail(path, node, "bandwidth must be > 0, got " + text, "write a positive value such as 25GBps");
  return value;
}

Seconds YamlReader::get_duration(const YAML::Node& node, const std::string& path) const {
  std::string text = get_string(node, path);
  try {
    return parse_duration(text);
  } catch (const std::invalid_argument& e) {
    fail(path, node, e.what(), "write a duration such as 0.7us");
  }
}

Bytes YamlReader::get_size(const YAML::Node& node, const std::string& path) const {
  std::string text = get_string(node, path);
  try {
    return parse_size(text);
  } catch (const std::invalid_argument& e) {
    fail(path, node, e.what(), "write a size such as 80GB or 40MiB");
  }
}

std::string YamlReader::get_choice(const YAML::Node& node, const std::string& path,
                                   const std::vector<std::string>& choices) const {
  std::string text = get_string(node, path);
  if (std::find(choices.begin(), choices.end(), text) == choices.end())
    fail(path, node, "unknown value '" + text + "'", "use one of: " + join(choices));
  return text;
}

namespace {

// Past this many nodes a document is refused: aliases can make a small file expand
// exponentially ("billion laughs"), and no stepsim file comes near it (the largest measurement
// files hold ~10^5 nodes).
constexpr std::size_t kMaxYamlNodes = 4'000'000;

std::string line_of(const YAML::Node& node) {
  return node.Mark().is_null() ? std::string() : " (line " + std::to_string(node.Mark().line + 1) + ")";
}

// A scalar decoded to bytes that are not UTF-8. The file itself was checked, but yaml-cpp 0.7
// decodes the double-quoted escapes \N and \_ (U+0085, U+00A0) to single Latin-1 bytes, which
// its emitter then writes back as U+FFFD: the value would change between a file and its copy.
void check_scalar_text(const YAML::Node& scalar, const std::string& origin) {
  if (invalid_utf8(scalar.Scalar()) == std::string::npos) return;
  throw ConfigError(origin + line_of(scalar), "an escape in a quoted value decodes to bytes that are not UTF-8",
                    "write the character itself instead of \\N or \\_ (U+0085, U+00A0), or leave it out");
}

// Every mapping key must be a plain value, and appear once: yaml-cpp would let the first of two
// equal keys win silently, and fail on a list or map used as a key only when it is read.
// Iterative (an explicit stack): nesting depth is bounded by yaml-cpp's parser, but the walk
// must not depend on it.
void check_document(const YAML::Node& root, const std::string& origin) {
  std::vector<YAML::Node> pending = {root};
  std::size_t visited = 0;
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (++visited > kMaxYamlNodes)
      throw ConfigError(origin, "the document expands to more than " + std::to_string(kMaxYamlNodes) +
                                    " values (aliases repeated into each other?)",
                        "write the values out, without nested aliases");
    if (node.IsScalar()) {
      check_scalar_text(node, origin);
      continue;
    }
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) pending.push_back(item);
      continue;
    }
    if (!node.IsMap()) continue;
    std::map<std::string, int> first_line;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar())
        throw ConfigError(origin + line_of(entry.first), "a key is a list or a section, not a name",
                          "write `name: value` pairs; a link's ends go in `between: [a, b]`");
      check_scalar_text(entry.first, origin);
      const std::string& key = entry.first.Scalar();
      const int line = entry.first.Mark().is_null() ? 0 : entry.first.Mark().line + 1;
      if (auto [it, fresh] = first_line.emplace(key, line); !fresh)
        throw ConfigError(origin + line_of(entry.first),
                          "duplicate key '" + key + "' (first at line " + std::to_string(it->second) + ")",
                          "keep one '" + key + "'; YAML gives each key once per section");
      pending.push_back(entry.second);
    }
  }
}

}  // namespace

YAML::Node load_yaml(const std::string& yaml_text, const std::string& origin) {
  if (const std::size_t at = invalid_utf8(yaml_text); at != std::string::npos) {
    const auto line = 1 + std::count(yaml_text.begin(), yaml_text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    throw ConfigError(origin + " (line " + std::to_string(line) + ")",
                      "byte " + std::to_string(at) + " is not UTF-8 (a binary file, or text in another encoding)",
                      "save the file as UTF-8");
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(origin + " (line " + std::to_string(e.mark.line + 1) + ")", "malformed YAML: " + e.msg,
                      "fix the YAML syntax at that line");
  }
  check_document(root, origin);
  return root;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, "cannot read the file", "check the path and its permissions");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace stepsim::platforms
