// The bad-input catalogue: every case must exit with code 2 and a message that names where
// the problem is and how to fix it — never a crash, a hang or a silent default.
#include <gtest/gtest.h>

#include "tools/tests/cli_run.hpp"

namespace stepsim::cli_test {
namespace {

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  std::vector<std::string> message_mentions;   ///< substrings stderr must contain
};

std::vector<BadInput> catalogue() {
  const std::vector<std::string> ar = {"--op", "allreduce", "--size", "1MiB"};
  auto with = [&](std::vector<std::string> head, std::vector<std::string> tail = {}) {
    std::vector<std::string> args = std::move(head);
    args.insert(args.end(), tail.begin(), tail.end());
    return args;
  };
  return {
      {"unknown_preset", with({"collective", "dgx-9000"}, ar), {"dgx-9000", "stepsim presets"}},
      {"missing_platform_file", with({"collective", "/nonexistent/platform.yaml"}, ar), {"/nonexistent/platform.yaml"}},
      {"unknown_op", {"collective", "dgx-h100", "--op", "allsmash", "--size", "1MiB"}, {"--op", "allsmash", "allreduce"}},
      {"size_not_a_number", {"collective", "dgx-h100", "--op", "allreduce", "--size", "lots"}, {"--size", "lots", "1GiB"}},
      {"size_bad_unit", {"collective", "dgx-h100", "--op", "allreduce", "--size", "5parsecs"}, {"--size", "5parsecs"}},
      {"size_fractional_bytes", {"collective", "dgx-h100", "--op", "allreduce", "--size", "0.5"}, {"--size", "whole number"}},
      {"size_zero", {"collective", "dgx-h100", "--op", "allreduce", "--size", "0"}, {"--size", "> 0"}},
      {"duplicate_gpu", with({"collective", "dgx-h100", "--gpus", "0,1,1"}, ar), {"--gpus", "1"}},
      {"gpu_out_of_range", with({"collective", "dgx-h100", "--gpus", "0,9"}, ar), {"--gpus", "9"}},
      {"node_out_of_range", with({"collective", "dgx-h100", "--gpus", "n0:0-1,n3:0-1"}, ar), {"--gpus", "n3"}},
      {"gpu_list_garbage", with({"collective", "dgx-h100", "--gpus", "0,,x"}, ar), {"--gpus"}},
      {"single_rank", with({"collective", "dgx-h100", "--gpus", "3"}, ar), {"--gpus", "2 or more"}},
      {"unknown_algo", with({"collective", "dgx-h100", "--algo", "telepathy"}, ar), {"--algo", "telepathy", "ring"}},
      {"unsupported_algo_here", with({"collective", "dgx-h100", "--algo", "hierarchical"}, ar), {"hierarchical"}},
      {"unknown_engine", with({"collective", "dgx-h100", "--engine", "quantum"}, ar), {"--engine", "quantum"}},
      {"root_out_of_range", {"collective", "dgx-h100", "--op", "broadcast", "--size", "1MiB", "--root", "8"},
       {"--root", "8"}},
      {"bad_format", with({"collective", "dgx-h100", "--format", "xml"}, ar), {"--format", "xml"}},
      {"bad_algo_param", with({"collective", "dgx-h100", "--algo-param", "proto"}, ar), {"--algo-param", "key=value"}},
      {"unknown_override_key", with({"collective", "dgx-h100", "-p", "gpu.colour=red"}, ar), {"gpu.colour"}},
      {"unknown_gpu_model", with({"collective", "dgx-h100", "-p", "gpu.model=Voodoo2"}, ar), {"Voodoo2"}},
      {"zero_nodes", with({"collective", "dgx-h100", "--nodes", "0"}, ar), {"--nodes"}},
      {"fabric_undersubscribed", with({"collective", "dgx-h100", "--nodes", "2", "--fabric", "rail-optimized", "-p",
                                      "fabric.oversubscription=0.5"}, ar),
       {"fabric.oversubscription", "below 1", "2:1"}},
      {"fabric_taper_without_leaves", with({"collective", "dgx-h100", "--nodes", "8", "-p", "fabric.oversubscription=2"}, ar),
       {"fabric.oversubscription", "share one leaf", "fabric.nodes_per_leaf"}},
      {"malformed_yaml", with({"collective", fixture("malformed.yaml")}, ar), {"malformed.yaml", "line"}},
      {"unknown_yaml_key", with({"collective", fixture("unknown_key.yaml")}, ar), {"unknown_key.yaml", "colour", "line"}},
      {"zero_bandwidth", with({"collective", fixture("zero_bandwidth.yaml")}, ar), {"zero_bandwidth.yaml", "bandwidth"}},
      {"disconnected_topology", with({"collective", fixture("disconnected.yaml")}, ar), {"disconnected.yaml", "gpu"}},
      {"import_garbage_topo", {"import", "nvidia-smi-topo", fixture("malformed.yaml")}, {"malformed.yaml"}},
      {"no_subcommand", {}, {"subcommand"}},
      {"tuner_table_min_above_max", {"tuner-table", "dgx-a100", "--min", "4KiB", "--max", "1KiB"}, {"--max", "--min"}},
      {"tuner_table_bad_size", {"tuner-table", "dgx-a100", "--min", "lots"}, {"--min", "lots"}},
      {"tuner_table_unknown_algo", {"tuner-table", "dgx-a100", "--algos", "warp"}, {"--algo", "warp", "nccl"}},
      {"tuner_table_one_gpu", {"tuner-table", "dgx-a100", "--gpus", "0"}, {"--gpus", "2 or more"}},
      {"rank_sharding_unknown_planner", {"rank-sharding", "dgx-a100", "dlrm-criteo-1tb", "--planners", "best"},
       {"--planners", "size_greedy"}},
      {"rank_sharding_not_dlrm", {"rank-sharding", "dgx-a100", "llama3-8b"}, {"llama3-8b", "dlrm"}},
      {"dlrm_placement_wrong_length",
       {"simulate", "dgx-a100", "dlrm-criteo-1tb", "-p", "workload.sharding.placement=[0,1]"},
       {"sharding.placement", "26 tables"}},
  };
}

class BadInputCatalogue : public testing::TestWithParam<BadInput> {};

TEST_P(BadInputCatalogue, ExitsWithCode2AndAClearMessage) {
  const BadInput& c = GetParam();
  RunResult r = run_stepsim(c.args);
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  for (const std::string& mention : c.message_mentions)
    EXPECT_NE(r.err.find(mention), std::string::npos) << "stderr lacks '" << mention << "':\n" << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Cli, BadInputCatalogue, testing::ValuesIn(catalogue()),
                         [](const testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace stepsim::cli_test
