#pragma once
/// @file Checked access to a YAML document: every read names the file, the key path and the line
/// in its ConfigError, and maps reject keys they do not know.
#include <yaml-cpp/yaml.h>

#include <climits>
#include <map>
#include <string>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::platforms {

/// @brief A YAML document with the context needed for error messages.
///
/// Contract: nodes set by `-p key=value` carry no line; errors on them name the override
/// instead (`set by -p fabric.kind=...`). Getters throw ConfigError on a missing key, a wrong
/// type or a bad unit; `check_keys` throws on keys outside the allowed list.
class YamlReader {
 public:
  explicit YamlReader(std::string origin) : origin_(std::move(origin)) {}

  /// @brief Applies `key.path=value` to `root`, creating maps on the way. `label` names the
  /// flag in errors (e.g. "-p nodes=4" or "--nodes 4").
  /// A value starting with '[' is a YAML flow list of plain values (-p fabric.nccl_protocols=[Simple]).
  void apply_override(YAML::Node& root, const std::string& assignment, const std::string& label);

  /// @brief "origin: path (line N)" for a node at `path`.
  std::string where(const std::string& path, const YAML::Node& node) const;
  [[noreturn]] void fail(const std::string& path, const YAML::Node& node, const std::string& what,
                         const std::string& fix) const;
  /// @brief Fails at dotted `path` under `root`, with the line of the deepest part of the path
  /// that is present (the key itself, or the section that lacks it).
  [[noreturn]] void fail_at(const YAML::Node& root, const std::string& path, const std::string& what,
                            const std::string& fix) const;

  void check_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& allowed) const;
  YAML::Node require(const YAML::Node& map, const std::string& path, const std::string& key) const;

  std::string get_string(const YAML::Node& node, const std::string& path) const;
  /// @brief A whole number in [min_value, max_value]; past max_value the error states the limit.
  int get_int(const YAML::Node& node, const std::string& path, int min_value, int max_value = INT_MAX) const;
  double get_number(const YAML::Node& node, const std::string& path) const;  ///< >= 0
  bool get_bool(const YAML::Node& node, const std::string& path) const;
  BytesPerSecond get_bandwidth(const YAML::Node& node, const std::string& path) const;  ///< > 0
  Seconds get_duration(const YAML::Node& node, const std::string& path) const;          ///< >= 0
  Bytes get_size(const YAML::Node& node, const std::string& path) const;                ///< >= 0
  /// @brief A string that must be one of `choices`.
  std::string get_choice(const YAML::Node& node, const std::string& path,
                         const std::vector<std::string>& choices) const;

  const std::string& origin() const { return origin_; }

 private:
  static YAML::Node flow_list(const std::string& value, const std::string& label);
  std::string origin_;
  std::map<std::string, std::string> overrides_;  ///< key path -> flag text that set it
};

/// @brief The node at dotted `path` under `root` ("sharding.plan"), or an undefined node (false
/// in a condition) where a step is absent or not a map. Never yaml-cpp's invalid node, which throws on its next access: a
/// generator may ask for a key of a section the file does not have.
YAML::Node find_node(const YAML::Node& root, const std::string& path);

/// @brief Parses YAML text; a syntax error is a ConfigError naming `origin` and the line.
YAML::Node load_yaml(const std::string& yaml_text, const std::string& origin);

/// @brief The whole file at `path`; ConfigError naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

/// @brief "a, b, c" for error messages.
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace stepsim::platforms
