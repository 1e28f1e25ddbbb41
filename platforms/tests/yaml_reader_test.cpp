// The YAML reader's lookups and error locations (platforms/yaml_reader.hpp): find_node never
// hands out yaml-cpp's invalid node nor adds keys to the document, fail_at names the deepest
// part of a path that is present, and an item of an overridden list names the -p flag.
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

}  // namespace
}  // namespace stepsim::platforms
