// calibrate(): recovers a known bandwidth factor from hand-computed times, holds out every
// other size, writes a platform that validates with the fitted figure, and says why a factor
// it could not fit was kept (no case depends on it, or the cases pin it down too loosely).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "platforms/config_error.hpp"
#include "validation/calibrate.hpp"
#include "validation/measurement.hpp"

namespace stepsim::validation {
namespace {

// Two GPUs on one 100 GB/s, 1 us NVLink (see the fixture): a ring allgather of S bytes takes
// 1 us + (S / 2) / (scale x 100 GB/s).
const std::string kPlatform = std::string(STEPSIM_VALIDATION_FIXTURES) + "/validate_two_gpus.yaml";

// One ring step of half the bytes over the 1 us link, as a Simple kernel on NCCL's
// primitives: launch 8.4 us and 3.4 - 0.6 us of handover (models/collectives/primitives_runtime.hpp).
double ring_allgather_s(double bytes, double bandwidth_scale) {
  return 8.4e-6 + 2.8e-6 + 1e-6 + bytes / 2 / (bandwidth_scale * 100e9);
}

MeasurementFile allgathers(const std::vector<double>& sizes, const std::vector<double>& times) {
  MeasurementFile f;
  f.path = "allgathers.yaml";
  f.system.gpus = 2;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Measurement m;
    m.kind = "collective";
    m.time_s = times[i];
    m.numbers = {{"size_bytes", sizes[i]}, {"ranks", 2}};
    m.texts = {{"op", "allgather"}};
    f.measurements.push_back(m);
  }
  return f;
}

CalibrateOptions ring_options() {
  CalibrateOptions o;
  o.validate.platform = kPlatform;
  o.validate.algo = "ring";
  return o;
}

const FittedParameter& parameter(const CalibrationOutcome& out, const std::string& key) {
  for (const FittedParameter& p : out.parameters)
    if (p.key == key) return p;
  throw std::runtime_error("no parameter " + key);
}

TEST(Calibrate, RecoversTheLinkBandwidthAndValidatesOnTheHeldOutSizes) {
  const std::vector<double> sizes = {1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30};
  std::vector<double> times;
  for (double s : sizes) times.push_back(ring_allgather_s(s, 0.8));
  const CalibrationOutcome out = calibrate({allgathers(sizes, times)}, ring_options());

  const FittedParameter& nvlink = parameter(out, "links.nvlink.bandwidth_scale");
  ASSERT_TRUE(nvlink.determined);
  EXPECT_NEAR(nvlink.value, 0.8, 1e-4);
  // The calibrated protocol factors are NCCL's lowering's: they move no ring case and are kept.
  const FittedParameter& simple = parameter(out, "protocols.Simple.efficiency_scale");
  EXPECT_FALSE(simple.determined);
  EXPECT_EQ(simple.dropped_error, 0.0);
  EXPECT_EQ(simple.value, 1.0);

  // Every other size is fitted (1st, 3rd, 5th), the rest are held out and predicted exactly.
  EXPECT_EQ(out.fit.cases, 3);
  EXPECT_EQ(out.holdout.cases, 3);
  ASSERT_EQ(out.fitted.size(), 1u);
  EXPECT_EQ(out.fitted[0].cases, (std::vector<int>{0, 2, 4}));
  // Held out 4 MiB, 64 MiB, 1 GiB: the preset's 100 GB/s is 1/0.8 too fast, diluted at 4 MiB
  // by the fixed 12.2 us: ratios 1.157, 1.241, 1.250, geomean 21.5 %.
  EXPECT_NEAR(out.holdout.before, 0.215, 0.002);
  EXPECT_LT(out.holdout.after, 1e-4);

  // The written platform carries the factor; validate with it scores only the held-out cases,
  // and predicts them exactly.
  const std::string path = ::testing::TempDir() + "calibrated_two_gpus.yaml";
  std::ofstream(path) << out.platform_yaml;
  ValidateOptions with_calibrated;
  with_calibrated.platform = path;
  with_calibrated.algo = "ring";
  const ValidationResult r = validate({allgathers(sizes, times)}, with_calibrated);
  ASSERT_EQ(r.cases.size(), 3u);
  for (const CaseResult& c : r.cases) EXPECT_LT(std::abs(c.log_error), 1e-4) << c.label;
}

TEST(Calibrate, AFactorTheCasesPinDownLooselyIsKeptAndSaysHowLoosely) {
  // Latency-bound sizes (the bandwidth term is at most 2 % of 1 us) measured with +-30 %
  // scatter: the bandwidth factor moves every case, but not enough to be pinned down.
  const std::vector<double> sizes = {64, 128, 256, 512, 1024, 2048, 4096, 8192};
  std::vector<double> times;
  for (std::size_t i = 0; i < sizes.size(); ++i) times.push_back(ring_allgather_s(sizes[i], 1.0) * (i % 4 < 2 ? 1.3 : 0.7));
  const CalibrationOutcome out = calibrate({allgathers(sizes, times)}, ring_options());

  const FittedParameter& nvlink = parameter(out, "links.nvlink.bandwidth_scale");
  EXPECT_FALSE(nvlink.determined);
  EXPECT_GT(nvlink.dropped_error, 0.25);
  EXPECT_EQ(nvlink.value, 1.0) << "a dropped factor keeps the preset's figure";
  const std::string text = format_calibration_text(out);
  EXPECT_NE(text.find("too loose"), std::string::npos) << text;
}

TEST(Calibrate, NoCaseTheModelPredictsIsAnError) {
  MeasurementFile f = allgathers({1 << 20}, {1e-4});
  f.measurements[0].texts["op"] = "alltoall";   // the ring cannot run it
  EXPECT_THROW(calibrate({f}, ring_options()), ConfigError);
}

}  // namespace
}  // namespace stepsim::validation
