// The YAML reader's lookups and error locations (platforms/yaml_reader.hpp): find_node never
// hands out yaml-cpp's invalid node nor adds keys to the document, fail_at names the deepest
// part of a path that is present, an item of an overridden list names the -p flag, and
// load_yaml refuses values that do not decode to UTF-8.
#include <gtest/gtest.h>

#include "platforms/config_error.hpp"
#include "platforms/yaml_reader.hpp"

namespace stepsim::platforms {
namespace {

const char* kDoc = "version: 1\nmodel:\n  layers: 32\n  tables: {rows: [10, 20]}\nname: x\n";

std::string failure(const YamlReader& reader, const YAML::Node& doc, const std::string& path) {
  try {
    reader.fail_at(doc, path, "bad", "fix it");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(FindNode, PresentPathsGiveTheirNodeAndAbsentOnesAreFalse) {
  const YAML::Node doc = load_yaml(kDoc, "w.yaml");
  ASSERT_TRUE(find_node(doc, "model.layers"));
  EXPECT_EQ(find_node(doc, "model.layers").as<int>(), 32);
  EXPECT_TRUE(find_node(doc, "model.tables.rows").IsSequence());
  for (const char* absent : {"sharding", "sharding.plan", "model.heads", "model.layers.deeper", "name.x.y", ""})
    EXPECT_FALSE(find_node(doc, absent)) << absent;
}

TEST(FindNode, LooksUpWithoutAddingKeys) {
  const YAML::Node doc = load_yaml(kDoc, "w.yaml");
  const std::string before = YAML::Dump(doc);
  find_node(doc, "sharding.plan");
  find_node(doc, "model.heads");
  EXPECT_EQ(YAML::Dump(doc), before);
  EXPECT_FALSE(doc["sharding"]);
  EXPECT_EQ(doc["model"].size(), 2u);
}

TEST(FailAt, NamesThePathAndTheLineOfItsDeepestPresentPart) {
  const YAML::Node doc = load_yaml(kDoc, "w.yaml");
  const YamlReader reader("w.yaml");
  EXPECT_EQ(failure(reader, doc, "model.layers"), "w.yaml: model.layers (line 3): bad (fix: fix it)");
  EXPECT_EQ(failure(reader, doc, "model.heads"), "w.yaml: model.heads (line 3): bad (fix: fix it)");
  EXPECT_EQ(failure(reader, doc, "sharding.plan"), "w.yaml: sharding.plan (line 1): bad (fix: fix it)");
}

TEST(Where, AnItemOfAnOverriddenListNamesTheFlag) {
  YAML::Node doc = load_yaml(kDoc, "w.yaml");
  YamlReader reader("w.yaml");
  reader.apply_override(doc, "model.tables.rows=[1e30,10]", "-p workload.model.tables.rows=[1e30,10]");
  EXPECT_EQ(reader.where("model.tables.rows[0]", doc["model"]["tables"]["rows"][0]),
            "w.yaml: model.tables.rows[0] (set by -p workload.model.tables.rows=[1e30,10])");
  EXPECT_EQ(reader.where("model.layers", doc["model"]["layers"]), "w.yaml: model.layers (line 3)");
}

// yaml-cpp decodes \N and \_ to single bytes (85, A0) that are not UTF-8; every other escape,
// \xA0 and \u00A0 included, to UTF-8. A value or key that is not UTF-8 is refused at its line.
TEST(LoadYaml, RefusesEscapesThatDecodeToBytesThatAreNotUtf8) {
  for (const char* text : {"a: \"x\\_y\"", "a: [1, \"\\N\"]", "\"k\\_\": 1", "a:\n  b: \"\\_\""}) {
    try {
      load_yaml(text, "w.yaml");
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not UTF-8"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("(line "), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(load_yaml("a: \"x\\xa0y\\u00a0\\L\"", "w.yaml")["a"].as<std::string>(),
            "x\xc2\xa0y\xc2\xa0\xe2\x80\xa8");
}

TEST(ApplyOverride, RefusesValuesThatAreNotUtf8) {
  YAML::Node doc = load_yaml(kDoc, "w.yaml");
  YamlReader reader("w.yaml");
  for (const char* assignment : {"name=x\xffy", "na\xe9me=x", "model.tables.rows=[\"\\_\"]"})
    EXPECT_THROW(reader.apply_override(doc, assignment, std::string("-p ") + assignment), ConfigError) << assignment;
  EXPECT_EQ(doc["name"].as<std::string>(), "x");
  reader.apply_override(doc, "name=caf\xc3\xa9", "-p name");
  EXPECT_EQ(doc["name"].as<std::string>(), "caf\xc3\xa9");
}

}  // namespace
}  // namespace stepsim::platforms
