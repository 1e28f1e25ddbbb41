// validate(): hand-computed predictions and errors on a two-GPU platform, the geomean
// definition, what the files' system facts change, not-modelled kinds and bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "models/compression/codec.hpp"
#include "models/compute/kernel.hpp"
#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "sim/replay.hpp"
#include "validation/validate.hpp"
#include "workloads/workload.hpp"

namespace stepsim::validation {
namespace {

const std::string kPlatform = std::string(STEPSIM_VALIDATION_FIXTURES) + "/validate_two_gpus.yaml";

Measurement make(const std::string& kind, double time_s, std::map<std::string, double> numbers,
                 std::map<std::string, std::string> texts = {}) {
  Measurement m;
  m.kind = kind;
  m.time_s = time_s;
  m.numbers = std::move(numbers);
  m.texts = std::move(texts);
  return m;
}

Measurement allgather(double bytes, double time_s) {
  return make("collective", time_s, {{"size_bytes", bytes}, {"ranks", 2}}, {{"op", "allgather"}});
}

MeasurementFile file_of(std::vector<Measurement> measurements) {
  MeasurementFile f;
  f.path = "cases.yaml";
  f.system.gpus = 2;
  f.measurements = std::move(measurements);
  return f;
}

ValidateOptions ring_on_fixture() {
  ValidateOptions o;
  o.platform = kPlatform;
  o.algo = "ring";
  return o;
}

TEST(Geomean, IsExpOfTheMeanAbsoluteLogErrorMinusOne) {
  EXPECT_DOUBLE_EQ(geomean_error({std::log(1.25)}), 0.25);
  // Symmetric: 25 % too slow and 20 % too fast are the same error.
  EXPECT_DOUBLE_EQ(geomean_error({std::log(1.25), std::abs(std::log(0.8))}), 0.25);
  EXPECT_NEAR(geomean_error({std::log(2.0), 0}), std::sqrt(2.0) - 1, 1e-15);
  EXPECT_TRUE(std::isnan(geomean_error({})));
}

TEST(Validate, RingAllgatherMatchesTheHandComputation) {
  // One ring step moves each rank's half over the 100 GB/s, 1 us link: 1 us + S/2 / 100 GB/s,
  // run as a Simple kernel on NCCL's primitives: + 8.4 us launch + (3.4 - 0.6) us handover.
  const ValidationResult r = validate({file_of({allgather(1e8, 4e-4), allgather(1024, 2e-6)})}, ring_on_fixture());
  ASSERT_EQ(r.cases.size(), 2u);
  const CaseResult& big = r.cases[0];
  const Seconds predicted = 8.4e-6 + 2.8e-6 + 1e-6 + 5e7 / 100e9;
  EXPECT_NEAR(big.predicted_s, predicted, 1e-15);
  EXPECT_NEAR(big.error, predicted / 4e-4 - 1, 1e-9);
  EXPECT_NEAR(big.log_error, std::log(predicted / 4e-4), 1e-9);
  EXPECT_NEAR(big.measured_rate, 1e8 / 4e-4 / 1e9 * 0.5, 1e-9);      // busbw factor (n-1)/n = 1/2
  EXPECT_NEAR(big.predicted_rate, 1e8 / predicted / 1e9 * 0.5, 1e-9);
  EXPECT_TRUE(big.headline);
  EXPECT_EQ(big.where, "cases.yaml: measurements[0]");
  EXPECT_EQ(big.platform, "two-gpus");
  EXPECT_EQ(big.key, "allgather, 2 ranks");

  const CaseResult& small = r.cases[1];
  // 1 KiB runs LL: 6.6 us launch, its hop is the link's, 8 B of data per 16 B line.
  const double small_pred = 6.6e-6 + 1e-6 + 512 / (0.5 * 100e9);
  EXPECT_NEAR(small.predicted_s, small_pred, 1e-15);
  EXPECT_NEAR(small.error, small_pred / 2e-6 - 1, 1e-9);
  EXPECT_FALSE(small.headline) << "1 KiB is below the 1 MiB headline size";

  ASSERT_EQ(r.groups.size(), 1u);
  const GroupSummary& g = r.groups[0];
  EXPECT_EQ(g.cases, (std::vector<std::size_t>{1, 0})) << "cases sorted by size";
  EXPECT_EQ(g.headline_count, 1u);
  EXPECT_NEAR(g.headline_geomean, predicted / 4e-4 - 1, 1e-9);
  EXPECT_NEAR(g.all_geomean, std::exp((std::log(predicted / 4e-4) + std::log(small_pred / 2e-6)) / 2) - 1, 1e-9);
  EXPECT_EQ(g.worst, (std::vector<std::size_t>{1, 0})) << "the 1 KiB case is off by 3.8x";
  EXPECT_TRUE(r.not_modelled.empty());
}

TEST(Validate, MinSizeMovesTheHeadline) {
  ValidateOptions o = ring_on_fixture();
  o.min_size = 1;
  const ValidationResult r = validate({file_of({allgather(1e8, 4e-4), allgather(1024, 2e-6)})}, o);
  EXPECT_EQ(r.groups[0].headline_count, 2u);
  EXPECT_DOUBLE_EQ(r.groups[0].headline_geomean, r.groups[0].all_geomean);
}

TEST(Validate, KindsWithNoModelAreCountedNotDropped) {
  MeasurementFile f = file_of({
      allgather(1e8, 4e-4),
      make("kernel", 1e-5, {}, {{"name", "ncclKernel<AllGather>"}}),
      make("kernel", 2e-5, {}, {{"name", "gemm_kernel"}}),
      make("compression", 1e-5, {{"size_bytes", 1 << 20}}, {{"codec", "lz4"}, {"direction", "compress"}}),
      make("copy", 1e-3, {{"size_bytes", 1 << 30}, {"src", 0}, {"dst", 1}}, {{"direction", "p2p"}}),
      make("embedding", 1e-3, {{"rows", 1e6}, {"dim", 128}, {"pooling", 20}, {"batch", 2048}, {"tables", 8}},
           {{"dtype", "fp32"}, {"distribution", "zipf"}}),
      make("collective", 1e-5, {{"size_bytes", 1 << 20}, {"ranks", 1}}, {{"op", "allreduce"}}),
  });
  const ValidationResult r = validate({f}, ring_on_fixture());
  EXPECT_EQ(r.cases.size(), 1u);
  ASSERT_EQ(r.not_modelled.size(), 5u);
  EXPECT_EQ(r.not_modelled.at("kernel").count, 2);
  EXPECT_EQ(r.not_modelled.at("kernel").where,
            (std::vector<std::string>{"cases.yaml: measurements[1]", "cases.yaml: measurements[2]"}));
  EXPECT_EQ(r.not_modelled.at("compression lz4").count, 1);
  EXPECT_EQ(r.not_modelled.at("copy p2p").count, 1);
  EXPECT_EQ(r.not_modelled.at("embedding zipf").count, 1);
  EXPECT_EQ(r.not_modelled.at("collective on 1 rank").count, 1);
  for (const auto& [key, n] : r.not_modelled) EXPECT_FALSE(n.reason.empty()) << key;

  const nlohmann::json j = validation_json(r);
  EXPECT_EQ(j["not_modelled"]["kernel"]["count"], 2);
  EXPECT_EQ(j["cases"].size(), 1u);
  const std::string text = format_validation_text(r);
  EXPECT_NE(text.find("not modelled: kernel (2 cases)"), std::string::npos) << text;
}

TEST(Validate, AlgorithmsThatCannotRunACaseAreNotModelled) {
  const ValidationResult r = validate(
      {file_of({make("collective", 1e-5, {{"size_bytes", 1 << 20}, {"ranks", 2}}, {{"op", "alltoall"}})})},
      ring_on_fixture());
  EXPECT_TRUE(r.cases.empty());
  ASSERT_EQ(r.not_modelled.count("collective alltoall (ring)"), 1u);
  EXPECT_NE(r.not_modelled.at("collective alltoall (ring)").reason.find("direct"), std::string::npos);
}

TEST(Validate, GemmAndCopyUseTheComputeModels) {
  MeasurementFile f = file_of({
      make("gemm", 1e-3, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {{"dtype", "bf16"}}),
      make("copy", 1e-3, {{"size_bytes", 1 << 30}}, {{"direction", "d2d"}}),
  });
  const ValidationResult r = validate({f}, ring_on_fixture());
  ASSERT_EQ(r.cases.size(), 2u);
  const platforms::Platform p = platforms::load_platform(kPlatform);
  models::KernelSpec spec{"gemm", models::Dtype::bf16, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {}};
  models::complete_kernel(spec, "test");
  EXPECT_DOUBLE_EQ(r.cases[0].predicted_s, models::kernel_cost(spec, p.gpu()).time);
  EXPECT_DOUBLE_EQ(r.cases[0].x, 2.0 * 4096 * 4096 * 4096);
  EXPECT_EQ(r.cases[0].key, "bf16");
  // A d2d copy reads and writes every byte: the rate counts both, and no faster than datasheet HBM.
  const CaseResult& copy = r.cases[1];
  EXPECT_NEAR(copy.predicted_rate * 1e9 * copy.predicted_s, 2.0 * (1 << 30), 1e-3);
  EXPECT_GT(copy.predicted_s, 2.0 * (1 << 30) / p.gpu().hbm_bandwidth);
  EXPECT_EQ(copy.model, "memory-bound");
}

// Host copies cross the route between the GPU and its socket's CPU; a copy of pageable memory
// runs no faster than that CPU's staging (dgx-h100: 63 GB/s PCIe links, 10.98 GB/s staging).
TEST(Validate, HostCopiesArePricedByTheRouteAndTheHostsStaging) {
  MeasurementFile f = file_of({
      make("copy", 1e-3, {{"size_bytes", 1 << 26}}, {{"direction", "h2d"}}),
      make("copy", 1e-3, {{"size_bytes", 1 << 26}}, {{"direction", "h2d"}, {"host_memory", "pageable"}}),
      make("copy", 1e-3, {{"size_bytes", 1 << 26}, {"src", 6}}, {{"direction", "d2h"}, {"host_memory", "pageable"}}),
  });
  ValidateOptions o;
  o.platform = "dgx-h100";
  const ValidationResult r = validate({f}, o);
  ASSERT_EQ(r.cases.size(), 3u);
  const platforms::Platform p = platforms::load_platform("dgx-h100");
  int cpu0 = -1, cpu1 = -1;
  for (int v = 0; v < p.vertex_count(); ++v) {
    if (p.vertex(v).name == "cpu0") cpu0 = v;
    if (p.vertex(v).name == "cpu1") cpu1 = v;
  }
  const platforms::Route& to_gpu0 = p.route(cpu0, p.gpu_vertex(0));
  const platforms::Route& from_gpu6 = p.route(p.gpu_vertex(6), cpu1);  // GPU 6 hangs off socket 1
  const double bytes = 1 << 26;
  EXPECT_DOUBLE_EQ(r.cases[0].predicted_s, to_gpu0.latency + bytes / to_gpu0.bandwidth);
  EXPECT_DOUBLE_EQ(to_gpu0.bandwidth, 63e9);
  EXPECT_DOUBLE_EQ(r.cases[1].predicted_s, to_gpu0.latency + bytes / 10.98e9);
  EXPECT_DOUBLE_EQ(r.cases[2].predicted_s, from_gpu6.latency + bytes / 10.98e9);
  EXPECT_EQ(r.cases[0].key, "h2d pinned");
  EXPECT_EQ(r.cases[1].key, "h2d pageable");
  EXPECT_EQ(r.cases[2].key, "d2h pageable");
  EXPECT_DOUBLE_EQ(r.cases[1].predicted_rate, bytes / r.cases[1].predicted_s / 1e9);  // one way: GB/s copied
}

// kernel: torch prices PyTorch's nn.EmbeddingBag kernel, one launch per table, forward only.
TEST(Validate, TorchEmbeddingBagCasesUseItsModelPerTable) {
  const std::map<std::string, double> shape{{"rows", 1000}, {"dim", 128}, {"pooling", 4}, {"batch", 65536}, {"tables", 3}};
  MeasurementFile f = file_of({
      make("embedding", 1e-3, shape, {{"dtype", "fp32"}, {"distribution", "uniform"}, {"kernel", "torch"}}),
      make("embedding", 1e-3, shape,
           {{"dtype", "fp32"}, {"distribution", "uniform"}, {"kernel", "torch"}, {"pass", "backward"}}),
  });
  const ValidationResult r = validate({f}, ring_on_fixture());
  ASSERT_EQ(r.cases.size(), 1u);
  const platforms::Platform p = platforms::load_platform(kPlatform);
  models::KernelSpec spec{
      "torch_embedding_bag", models::Dtype::fp32, {{"rows", 1000}, {"dim", 128}, {"pooling", 4}, {"batch", 65536}}, {}};
  models::complete_kernel(spec, "test");
  EXPECT_DOUBLE_EQ(r.cases[0].predicted_s, 3 * models::kernel_cost(spec, p.gpu()).time);
  EXPECT_EQ(r.cases[0].key, "torch forward, fp32");
  EXPECT_EQ(r.not_modelled.count("embedding torch backward"), 1u);
}

// --kind scores only the kinds asked for; the rest are counted in a note, not predicted (an
// iteration whose workload cannot load is then no error).
TEST(Validate, KindFilterLeavesOtherKindsOut) {
  MeasurementFile f = file_of({
      make("gemm", 1e-3, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {{"dtype", "bf16"}}),
      make("iteration", 1e-1, {}, {{"workload", "no-such-workload.yaml"}}),
      allgather(1e8, 4e-4),
  });
  ValidateOptions o = ring_on_fixture();
  o.kinds = {"gemm"};
  const ValidationResult r = validate({f}, o);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].kind, "gemm");
  EXPECT_TRUE(r.not_modelled.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("2 case(s) of other kinds left out"), std::string::npos) << r.notes[0];
  o.kinds = {"gemm", "collective"};
  EXPECT_EQ(validate({f}, o).cases.size(), 2u);
  o.kinds.clear();
  EXPECT_THROW(validate({f}, o), stepsim::ConfigError);  // all kinds: the missing workload is an error
}

// A Kineto import without --workload names the trace as the iteration's workload: counted as not
// modelled (with what to do), not an error; with --workload's name it is predicted as usual.
TEST(Validate, IterationsOfAProfilerTraceWithoutWorkloadAreNotModelled) {
  MeasurementFile f = file_of({make("iteration", 0.1, {}, {{"workload", "step.json.gz"}}),
                               make("gemm", 1e-3, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {{"dtype", "bf16"}})});
  f.source.tool = "kineto (PyTorch profiler)";
  f.source.file = "step.json.gz";
  const ValidationResult r = validate({f}, ring_on_fixture());
  EXPECT_EQ(r.cases.size(), 1u);
  ASSERT_EQ(r.not_modelled.count("iteration of a profiler trace"), 1u);
  EXPECT_NE(r.not_modelled.at("iteration of a profiler trace").reason.find("--workload"), std::string::npos);
}

TEST(Validate, CompressionUsesTheCodecModelWithTheCasesParameters) {
  MeasurementFile f = file_of({
      make("compression", 1e-4, {{"size_bytes", 1 << 26}, {"rate", 8}}, {{"codec", "zfp"}, {"direction", "compress"}}),
      make("compression", 1e-4, {{"size_bytes", 1 << 26}, {"compressed_bytes", 1 << 25}},
           {{"codec", "mpc"}, {"direction", "decompress"}}),
  });
  const ValidationResult r = validate({f}, ring_on_fixture());
  ASSERT_EQ(r.cases.size(), 2u);
  const platforms::Platform p = platforms::load_platform(kPlatform);
  const auto zfp = models::parse_codec("zfp:rate=8");
  EXPECT_DOUBLE_EQ(r.cases[0].predicted_s, zfp->compress_time(1 << 26, p.gpu()));
  EXPECT_EQ(r.cases[0].key, zfp->spec() + ", compress");
  const auto mpc = models::parse_codec("mpc:ratio=2");
  EXPECT_DOUBLE_EQ(r.cases[1].predicted_s, mpc->decompress_time(1 << 26, p.gpu())) << "ratio from compressed_bytes";
  EXPECT_EQ(r.groups[0].x_name, "size");
}

TEST(Validate, OverallFiguresJoinTheGroupsOfAKind) {
  MeasurementFile f = file_of({
      make("gemm", 1e-3, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {{"dtype", "bf16"}}),
      make("gemm", 1e-3, {{"m", 4096}, {"n", 4096}, {"k", 4096}}, {{"dtype", "fp32"}}),
      allgather(1e8, 4e-4),
  });
  const ValidationResult r = validate({f}, ring_on_fixture());
  ASSERT_EQ(r.groups.size(), 3u);
  ASSERT_EQ(r.overall.size(), 2u);
  EXPECT_EQ(r.overall[0].kind, "gemm");
  EXPECT_EQ(r.overall[0].key, "all");
  EXPECT_EQ(r.overall[0].cases.size(), 2u);
  EXPECT_NEAR(r.overall[0].all_geomean, geomean_error({r.cases[0].log_error, r.cases[1].log_error}), 1e-12);
  EXPECT_EQ(r.overall[1].kind, "collective");
  EXPECT_EQ(validation_json(r)["overall"].size(), 2u);
}

TEST(Validate, IterationReplaysTheWorkloadNamedBesideTheFile) {
  Measurement it = make("iteration", 1e-3, {}, {{"workload", "validate_iteration_trace.yaml"}});
  it.params = {"workload.params.m=8192"};
  MeasurementFile f = file_of({it});
  f.path = std::string(STEPSIM_VALIDATION_FIXTURES) + "/cases.yaml";   // the workload sits beside it
  const ValidationResult r = validate({f}, ring_on_fixture());
  ASSERT_EQ(r.cases.size(), 1u);

  const platforms::Platform p = platforms::load_platform(kPlatform);
  const platforms::Allocation a = platforms::parse_allocation("", p);
  const workloads::Trace trace = workloads::load_workload(
      std::string(STEPSIM_VALIDATION_FIXTURES) + "/validate_iteration_trace.yaml", {p, a}, {"params.m=8192"});
  EXPECT_DOUBLE_EQ(r.cases[0].predicted_s, sim::replay(trace, {p, a}).iteration_time);
  EXPECT_EQ(r.cases[0].key, "validate_iteration_trace.yaml");
  EXPECT_EQ(r.groups[0].x_name, "") << "an iteration has no size axis";
}

TEST(Validate, FileParamsApplyAndTheCommandLineWins) {
  const Measurement copy = make("copy", 1e-3, {{"size_bytes", 1 << 30}}, {{"direction", "d2d"}});
  const double h100 = validate({file_of({copy})}, ring_on_fixture()).cases[0].predicted_s;
  MeasurementFile h200 = file_of({copy});
  h200.system.params = {"gpu.model=H200-SXM5-141GB"};
  const ValidationResult r = validate({h200}, ring_on_fixture());
  EXPECT_LT(r.cases[0].predicted_s, h100) << "H200's HBM is faster";
  EXPECT_EQ(r.cases[0].platform, "two-gpus [gpu.model=H200-SXM5-141GB]");
  ValidateOptions o = ring_on_fixture();
  o.platform_options.overrides = {"gpu.model=H100-SXM5-80GB"};
  EXPECT_DOUBLE_EQ(validate({h200}, o).cases[0].predicted_s, h100);
}

TEST(Validate, TheFilesNcclVersionAppliesUnlessOverridden) {
  MeasurementFile f = file_of({allgather(1 << 26, 1e-3)});
  f.system.software["nccl"] = "1.0";
  ValidateOptions o = ring_on_fixture();
  o.algo = "nccl";
  try {
    validate({f}, o);
    FAIL() << "an unknown NCCL version must be rejected";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cases.yaml: measurements[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1.0"), std::string::npos) << e.what();
  }
  o.algo_params = {"version=2.18"};
  const ValidationResult r = validate({f}, o);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].model.rfind("nccl:", 0), 0u) << r.cases[0].model;
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("NCCL 1.0"), std::string::npos);
}

TEST(Validate, BadInputIsAConfigError) {
  ValidateOptions unknown = ring_on_fixture();
  unknown.platform = "dgx-9000";
  EXPECT_THROW(validate({file_of({allgather(1e8, 4e-4)})}, unknown), ConfigError);
  EXPECT_THROW(load_measurements("/nonexistent/measurements.yaml"), ConfigError);

  MeasurementFile wrong_list = file_of({allgather(1e8, 4e-4)});
  wrong_list.system.gpu_list = "0";
  try {
    validate({wrong_list}, ring_on_fixture());
    FAIL() << "a 2-rank case on a 1-GPU allocation must be rejected";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("measurements[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("system.gpu_list"), std::string::npos) << e.what();
  }
  ValidateOptions too_many = ring_on_fixture();
  MeasurementFile big = file_of({make("collective", 1e-3, {{"size_bytes", 1 << 20}, {"ranks", 4}}, {{"op", "allgather"}})});
  EXPECT_THROW(validate({big}, too_many), ConfigError);
}

}  // namespace
}  // namespace stepsim::validation
