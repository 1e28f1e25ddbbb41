// The Kineto importer on a hand-made PyTorch profiler trace (fixtures/kineto_two_streams.json:
// rank 0 of 2, two ProfilerSteps, a compute stream 7 and an NCCL stream 20), as measurements and
// as a workload that the trace loader and the replay accept.
#include "validation/importers/kineto.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "platforms/config_error.hpp"
#include "platforms/loader.hpp"
#include "platforms/yaml_reader.hpp"
#include "sim/replay.hpp"
#include "workloads/workload.hpp"

using namespace stepsim::validation;
using json = nlohmann::ordered_json;

namespace {

const std::string kTrace = std::string(STEPSIM_VALIDATION_FIXTURES) + "/kineto_two_streams.json";

const Measurement* find(const MeasurementFile& file, const std::string& kind, const std::string& key,
                        const std::string& value) {
  for (const Measurement& m : file.measurements)
    if (m.kind == kind && m.text_or(key, "") == value) return &m;
  return nullptr;
}

/// A file under /tmp removed when the test ends.
struct TempFile {
  explicit TempFile(const std::string& suffix) {
    char name[] = "/tmp/stepsim-kineto-XXXXXX";
    close(mkstemp(name));
    std::filesystem::remove(name);
    path = std::string(name) + suffix;
  }
  ~TempFile() { std::filesystem::remove(path); }
  std::string path;
};

TEST(KinetoImport, ReaderKeepsOnlyWhatTheImportersUse) {
  KinetoProfile p = read_kineto(kTrace);
  EXPECT_EQ(p.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.nccl_version, "2.20.5");
  EXPECT_EQ(p.cuda_version, "12.4");
  EXPECT_EQ(p.group_ranks.at("0"), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.gpu_events.size(), 7u);  // 6 kernels and a memcpy
  EXPECT_EQ(p.api_calls.size(), 8u);
  ASSERT_EQ(p.steps.size(), 2u);  // the gpu_user_annotation copy of step 2 is not a step
  EXPECT_EQ(p.steps[1].name, "ProfilerStep#2");
  std::optional<NcclCall> call = nccl_call(p.gpu_events[1]);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->op, "allreduce");
  EXPECT_EQ(call->size_bytes, 4194304);
  EXPECT_EQ(call->dtype, "float32");
  EXPECT_EQ(call->group_size, 2);
  EXPECT_EQ(call->ranks, (std::vector<int>{0, 1}));
}

TEST(KinetoImport, CollectiveMetadataFromRecordParamComms) {
  // A trace whose NCCL kernels carry no metadata: torch's record_param_comms op around the
  // launch (same thread, the launch inside it) holds it.
  json doc = json::parse(stepsim::platforms::read_text_file(kTrace));
  json events = json::array();
  for (json& e : doc["traceEvents"]) {
    if (e.value("name", "").rfind("ncclDevKernel", 0) == 0) {
      json args = {{"correlation", e["args"]["correlation"]}, {"stream", 20}};
      events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 1000}, {"tid", 1000},
                        {"ts", e["args"]["correlation"] == 2 ? 148 : 338}, {"dur", 12},
                        {"args", {{"Collective name", "_allgather_base"}, {"In msg nelems", 1024}, {"Out msg nelems", 2048},
                                  {"Group size", 2}, {"dtype", "BFloat16"}, {"Process Group Name", "0"},
                                  {"Process Group Ranks", "[0, 1]"}}}});
      e["args"] = args;
    }
    events.push_back(e);
  }
  doc["traceEvents"] = events;
  KinetoProfile p = parse_kineto(doc.dump(), "no-kernel-metadata.json");
  int calls = 0;
  for (const KinetoEvent& e : p.gpu_events)
    if (std::optional<NcclCall> call = is_nccl_kernel(e) ? nccl_call(e) : std::nullopt) {
      ++calls;
      EXPECT_EQ(call->op, "allgather");
      EXPECT_EQ(call->size_bytes, 4096);
      EXPECT_EQ(call->dtype, "bfloat16");
    }
  EXPECT_EQ(calls, 2);
}

// aten matrix-product ops with recorded shapes become gemm entries: an addmm (bias, A, B) whose
// launches started a GEMM and a split-K reduction (10 + 2 us), the same shape again (14 us:
// one entry, mean 13 us), a bmm whose A is a transposed view (strides), an mm inside an outer
// mm (each launch counts for the innermost op), and an mm without shapes (counted in the notes).
TEST(KinetoImport, MatrixProductOpsBecomeInSituGemms) {
  json events = json::array();
  int correlation = 100;
  const auto op = [&](const std::string& name, double ts, double dur, json args) {
    events.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur},
                      {"args", args}});
  };
  const auto launch = [&](double ts, double gpu_ts, double gpu_dur, const std::string& kernel) {
    ++correlation;
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1},
                      {"ts", ts}, {"dur", 2}, {"args", {{"correlation", correlation}}}});
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", kernel}, {"pid", 0}, {"tid", 7}, {"ts", gpu_ts},
                      {"dur", gpu_dur}, {"args", {{"correlation", correlation}, {"stream", 7}}}});
  };
  const json half2 = json::array({"c10::Half", "c10::Half", "c10::Half"});
  op("aten::addmm", 0, 20,
     {{"Input Dims", {{1024}, {8192, 512}, {512, 1024}}}, {"Input Strides", {{1}, {512, 1}, {1, 512}}},
      {"Input type", half2}});
  launch(5, 100, 10, "gemm_kernel");
  launch(10, 111, 2, "splitKreduce_kernel");
  op("aten::addmm", 30, 20,
     {{"Input Dims", {{1024}, {8192, 512}, {512, 1024}}}, {"Input Strides", {{1}, {512, 1}, {1, 512}}},
      {"Input type", half2}});
  launch(35, 120, 14, "gemm_kernel");
  op("aten::bmm", 60, 20,
     {{"Input Dims", {{64, 27, 128}, {64, 128, 27}}}, {"Input Strides", {{3456, 1, 27}, {3456, 27, 1}}},
      {"Input type", {"float", "float"}}});
  launch(65, 140, 30, "bmm_kernel");
  op("aten::mm", 90, 30, {{"Input Dims", {{4096, 4096}, {4096, 4096}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}});
  op("aten::mm", 95, 10, {{"Input Dims", {{256, 256}, {256, 256}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}});
  launch(100, 180, 4, "inner_kernel");
  launch(110, 190, 50, "outer_kernel");
  op("aten::mm", 130, 10, json::object());
  launch(132, 250, 5, "shapeless_kernel");
  json doc = {{"traceEvents", events}};

  const KinetoProfile p = parse_kineto(doc.dump(), "matmuls.json");
  ASSERT_EQ(p.matmuls.size(), 6u);
  const MeasurementFile f = kineto_measurements(p, KinetoOptions{});
  std::vector<const Measurement*> gemms;
  for (const Measurement& m : f.measurements)
    if (m.kind == "gemm") gemms.push_back(&m);
  ASSERT_EQ(gemms.size(), 4u);  // sorted by (m, n, k, batch, dtype, layout)
  const auto shape = [](const Measurement* m) {
    return std::vector<double>{m->number("m"), m->number("n"), m->number("k"), m->number_or("batch", 1)};
  };
  EXPECT_EQ(shape(gemms[0]), (std::vector<double>{27, 27, 128, 64}));
  EXPECT_EQ(gemms[0]->text("dtype"), "fp32");
  EXPECT_EQ(gemms[0]->text("layout"), "TN");  // A (27 x 128, strides 1, 27) is a transposed view
  EXPECT_DOUBLE_EQ(gemms[0]->time_s, 30e-6);
  EXPECT_EQ(shape(gemms[1]), (std::vector<double>{256, 256, 256, 1}));
  EXPECT_DOUBLE_EQ(gemms[1]->time_s, 4e-6);   // the inner op's launch only
  EXPECT_FALSE(gemms[1]->texts.count("layout"));  // no strides recorded
  EXPECT_EQ(shape(gemms[2]), (std::vector<double>{4096, 4096, 4096, 1}));
  EXPECT_EQ(gemms[2]->text("dtype"), "bf16");
  EXPECT_DOUBLE_EQ(gemms[2]->time_s, 50e-6);
  EXPECT_EQ(shape(gemms[3]), (std::vector<double>{8192, 1024, 512, 1}));
  EXPECT_EQ(gemms[3]->text("dtype"), "fp16");
  EXPECT_EQ(gemms[3]->text("layout"), "NT");  // B (512 x 1024, strides 1, 512): the weight's transpose
  EXPECT_DOUBLE_EQ(gemms[3]->time_s, 13e-6);  // (10 + 2 and 14 us) / 2
  ASSERT_TRUE(gemms[3]->spread);
  EXPECT_EQ(gemms[3]->spread->repetitions, 2);
  EXPECT_NE(f.source.notes.find("1 matrix-product op(s) without recorded shapes"), std::string::npos) << f.source.notes;
}

TEST(KinetoImport, TruncatedRankListsAreCompleted) {
  KinetoEvent kernel;
  kernel.cat = "kernel";
  kernel.name = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  kernel.args = {{"Collective name", "_allgather_base"}, {"In msg nelems", 10}, {"Out msg nelems", 40},
                 {"Group size", 4}, {"dtype", "BFloat16"}, {"Process Group Name", "3"},
                 {"Process Group Ranks", "[1, 3, ...]"}};
  std::optional<NcclCall> call = nccl_call(kernel);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->op, "allgather");
  EXPECT_EQ(call->size_bytes, 80);  // the whole output buffer, as nccl-tests' size
  EXPECT_EQ(call->ranks, (std::vector<int>{1, 3, 5, 7}));
}

TEST(KinetoImport, Measurements) {
  KinetoOptions options;
  options.platform = "dgx-h100";
  options.workload = "kineto-fixture.yaml";
  MeasurementFile file = kineto_measurements(read_kineto(kTrace), options);
  EXPECT_EQ(file.system.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(file.system.gpus, 2);
  EXPECT_EQ(file.system.software.at("nccl"), "2.20.5");

  const Measurement* gemm = find(file, "kernel", "name", "void gemm_kernel<float>(float*, int)");
  ASSERT_TRUE(gemm);
  EXPECT_DOUBLE_EQ(gemm->time_s, 250e-6);  // 50 + 100 + 100 us over both steps
  EXPECT_EQ(gemm->number("count"), 3);
  EXPECT_EQ(gemm->number("stream"), 7);

  const Measurement* allreduce = find(file, "collective", "op", "allreduce");
  ASSERT_TRUE(allreduce);
  EXPECT_EQ(allreduce->number("size_bytes"), 4194304);
  EXPECT_EQ(allreduce->number("ranks"), 2);
  EXPECT_EQ(allreduce->text("dtype"), "float32");
  EXPECT_DOUBLE_EQ(allreduce->time_s, 85e-6);
  ASSERT_TRUE(allreduce->spread);
  EXPECT_EQ(allreduce->spread->repetitions, 2);
  EXPECT_DOUBLE_EQ(allreduce->spread->min_s, 80e-6);
  EXPECT_DOUBLE_EQ(allreduce->spread->max_s, 90e-6);
  EXPECT_NEAR(allreduce->spread->stdev_s, 7.0710678e-6, 1e-12);

  const Measurement* copy = find(file, "copy", "direction", "d2h");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->number("size_bytes"), 4096);
  EXPECT_DOUBLE_EQ(copy->time_s, 10e-6);

  std::vector<double> iterations;
  for (const Measurement& m : file.measurements)
    if (m.kind == "iteration") {
      iterations.push_back(m.time_s);
      EXPECT_EQ(m.text("workload"), "kineto-fixture.yaml");
    }
  EXPECT_EQ(iterations, (std::vector<double>{200e-6, 400e-6}));

  // A valid measurement file.
  MeasurementFile back = parse_measurements(format_measurements(file), "round-trip");
  EXPECT_EQ(back.measurements.size(), file.measurements.size());
}

TEST(KinetoImport, GzipTraceReadsTheSame) {
  TempFile gz(".json.gz");
  const std::string text = stepsim::platforms::read_text_file(kTrace);
  gzFile out = gzopen(gz.path.c_str(), "wb");
  ASSERT_TRUE(out);
  ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(out);
  KinetoProfile plain = read_kineto(kTrace), packed = read_kineto(gz.path);
  EXPECT_EQ(packed.gpu_events.size(), plain.gpu_events.size());
  KinetoOptions options;
  options.workload = "w";
  EXPECT_EQ(kineto_measurements(packed, options).measurements, kineto_measurements(plain, options).measurements);
}

TEST(KinetoImport, BadInputIsAConfigError) {
  EXPECT_THROW(parse_kineto("{\"traceEvents\": [\n{\"ph\": \"X\",,}]}", "bad.json"), stepsim::ConfigError);
  try {
    parse_kineto("{\"traceEvents\": [\n{\"ph\": \"X\",,}]}", "bad.json");
  } catch (const stepsim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json (line 2)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_kineto("[1, 2]", "list.json"), stepsim::ConfigError);
  KinetoOptions options;
  options.step = 7;
  std::vector<std::string> notes;
  try {
    kineto_workload({read_kineto(kTrace)}, options, notes);
    FAIL() << "expected ConfigError";
  } catch (const stepsim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no ProfilerStep#7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ProfilerStep#1, ProfilerStep#2"), std::string::npos) << e.what();
  }
}

TEST(KinetoImport, WorkloadOfTheLastStep) {
  std::vector<std::string> notes;
  json trace = kineto_workload({read_kineto(kTrace)}, {}, notes);
  EXPECT_EQ(trace["ranks"], 2);
  EXPECT_FALSE(trace.contains("groups"));  // the allreduce runs on every rank: `world`
  ASSERT_EQ(trace["programs"].size(), 1u);
  const json& program = trace["programs"][0];
  EXPECT_EQ(program["ranks"], "all");
  EXPECT_EQ(program["streams"], json({"s7", "s20"}));
  // CPU time between launch ends (300 -> 315 -> 334 -> 346 -> 368 -> 375), the device sync
  // (380..642) and the rest of the step (642 -> 700); the NCCL kernel started when the
  // elementwise kernel ended (450 -> 452) and the last GEMM when the allreduce ended (532 -> 540).
  const json expected = json::parse(R"ops([
    {"cpu": "15us"},
    {"gpu": "100us", "stream": "s7", "name": "gemm_kernel<float>"},
    {"cpu": "19us"},
    {"gpu": "30us", "stream": "s7", "name": "at::native::elementwise_kernel<128, 4>"},
    {"record": "e3", "stream": "s7"},
    {"cpu": "12us"},
    {"wait": "e3", "stream": "s20"},
    {"collective": "allreduce", "stream": "s20", "size": 4194304, "name": "allreduce"},
    {"record": "e6", "stream": "s20"},
    {"cpu": "22us"},
    {"gpu": "10us", "stream": "s7", "name": "Memcpy DtoH (Device -> Pageable)"},
    {"cpu": "7us"},
    {"wait": "e6", "stream": "s7"},
    {"gpu": "100us", "stream": "s7", "name": "gemm_kernel<float>"},
    {"cpu": "5us"},
    {"sync": "device"},
    {"cpu": "58us"}])ops");
  EXPECT_EQ(program["ops"], expected) << program["ops"].dump(1);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("2 cross-stream wait(s)"), std::string::npos) << notes[0];
}

TEST(KinetoImport, SubgroupsAreWrittenAsFamilies) {
  KinetoProfile p = read_kineto(kTrace);
  p.world_size = 8;
  for (KinetoEvent& e : p.gpu_events)
    if (is_nccl_kernel(e)) e.args["Process Group Ranks"] = "[2, 6]", e.args["Process Group Name"] = "5";
  std::vector<std::string> notes;
  json trace = kineto_workload({p}, {}, notes);
  EXPECT_EQ(trace["groups"], json::parse(R"({"pg5": {"size": 2, "stride": 4}})"));
  EXPECT_EQ(trace["programs"][0]["ops"][7]["group"], "pg5");
}

// What `stepsim simulate` does with a workload file: load it for a job, then replay it.
TEST(KinetoImport, SimulateAcceptsTheWorkloadInYamlAndJson) {
  std::vector<std::string> notes;
  const json workload = kineto_workload({read_kineto(kTrace)}, {}, notes);
  stepsim::platforms::Platform platform = stepsim::platforms::load_platform("dgx-h100");
  stepsim::platforms::Allocation allocation = stepsim::platforms::parse_allocation("0,1", platform);
  for (const std::string suffix : {".yaml", ".json"}) {
    TempFile file(suffix);
    std::ofstream(file.path) << format_workload(workload, file.path);
    stepsim::workloads::Trace trace =
        stepsim::workloads::load_workload(file.path, stepsim::workloads::JobContext{platform, allocation});
    EXPECT_EQ(trace.ranks, 2);
    stepsim::sim::Prediction prediction = stepsim::sim::replay(trace, stepsim::sim::Placement{platform, allocation});
    // Stream 7 holds 240 us of measured GPU work after the first launch (15 us), and the step's
    // CPU tail follows the device sync: at least 15 + 240 + 58 us, plus the allreduce.
    EXPECT_GT(prediction.iteration_time, 313e-6) << suffix;
    EXPECT_LT(prediction.iteration_time, 1e-3) << suffix;
    EXPECT_EQ(prediction.rank_time[0], prediction.rank_time[1]) << suffix;  // one program for both ranks
  }
}

// One trace per rank: one program each, ranks from distributedInfo.rank, in any order given.
TEST(KinetoImport, OneTracePerRank) {
  json doc = json::parse(stepsim::platforms::read_text_file(kTrace));
  doc["distributedInfo"]["rank"] = 1;
  KinetoProfile rank1 = parse_kineto(doc.dump(), "rank1.json");
  std::vector<std::string> notes;
  const json workload = kineto_workload({rank1, read_kineto(kTrace)}, {}, notes);
  ASSERT_EQ(workload["programs"].size(), 2u);
  EXPECT_EQ(workload["programs"][0]["ranks"], json::array({1}));
  EXPECT_EQ(workload["programs"][1]["ranks"], json::array({0}));
  stepsim::platforms::Platform platform = stepsim::platforms::load_platform("dgx-h100");
  stepsim::platforms::Allocation allocation = stepsim::platforms::parse_allocation("0,1", platform);
  TempFile file(".json");
  std::ofstream(file.path) << format_workload(workload, file.path);
  stepsim::workloads::Trace trace =
      stepsim::workloads::load_workload(file.path, stepsim::workloads::JobContext{platform, allocation});
  EXPECT_GT(stepsim::sim::replay(trace, stepsim::sim::Placement{platform, allocation}).iteration_time, 313e-6);

  try {
    kineto_workload({rank1, rank1}, {}, notes);
    FAIL() << "expected ConfigError";
  } catch (const stepsim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("given twice"), std::string::npos) << e.what();
  }
}

}  // namespace
