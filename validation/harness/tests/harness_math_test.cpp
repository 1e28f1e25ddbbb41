// Host arithmetic of the harness: repetition statistics, nccl-tests' buffer sizes and bus
// factors, GEMM shapes and their cuBLAS calls (checked against an explicit matrix product), and
// the run facts written into every file.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "validation/harness/gemm_reference.hpp"
#include "validation/harness/gemm_shapes.hpp"
#include "validation/harness/nccl_counts.hpp"
#include "validation/harness/run_info.hpp"
#include "validation/harness/spread_stats.hpp"

namespace stepsim::harness {
namespace {

TEST(SpreadStats, MeanExtremesAndSampleStdev) {
  const SampleStats s = summarize({1.0, 2.0, 3.0, 4.0});
  EXPECT_EQ(s.repetitions, 4);
  EXPECT_DOUBLE_EQ(s.mean_s, 2.5);
  EXPECT_DOUBLE_EQ(s.min_s, 1.0);
  EXPECT_DOUBLE_EQ(s.max_s, 4.0);
  EXPECT_DOUBLE_EQ(s.stdev_s, std::sqrt(5.0 / 3.0));
  EXPECT_EQ(summarize({2e-5}).stdev_s, 0.0);
  EXPECT_THROW(summarize({}), std::logic_error);
  // Close samples: the two-pass formula keeps the tiny spread.
  const SampleStats close = summarize({1e-5 + 1e-12, 1e-5 - 1e-12});
  EXPECT_NEAR(close.stdev_s, std::sqrt(2.0) * 1e-12, 1e-15);
}

TEST(NcclCounts, SizesFollowNcclTests) {
  const uint64_t MiB = 1 << 20;
  CollectiveBuffers b = collective_buffers("allreduce", MiB, 8, 4);
  EXPECT_EQ(b.send_count, MiB / 4);
  EXPECT_EQ(b.recv_count, MiB / 4);
  EXPECT_EQ(b.size_bytes, MiB);
  EXPECT_DOUBLE_EQ(b.bus_factor, 2.0 * 7 / 8);
  b = collective_buffers("allgather", MiB, 8, 4);  // size = the gathered (receive) buffer
  EXPECT_EQ(b.send_count, MiB / 32);
  EXPECT_EQ(b.recv_count, MiB / 4);
  EXPECT_EQ(b.size_bytes, MiB);
  EXPECT_DOUBLE_EQ(b.bus_factor, 7.0 / 8);
  b = collective_buffers("reduce_scatter", MiB, 8, 4);  // size = the send buffer
  EXPECT_EQ(b.send_count, MiB / 4);
  EXPECT_EQ(b.recv_count, MiB / 32);
  EXPECT_EQ(b.size_bytes, MiB);
  b = collective_buffers("alltoall", MiB, 8, 4);
  EXPECT_EQ(b.send_count, MiB / 4);
  EXPECT_DOUBLE_EQ(b.bus_factor, 7.0 / 8);
  for (const char* op : {"broadcast", "reduce", "sendrecv"}) {
    b = collective_buffers(op, MiB, 8, 4);
    EXPECT_EQ(b.size_bytes, MiB);
    EXPECT_DOUBLE_EQ(b.bus_factor, 1.0);
  }
}

TEST(NcclCounts, RoundsToWholeElementsPerRank) {
  CollectiveBuffers b = collective_buffers("allgather", 64, 3, 4);  // 16 floats: 5 per rank
  EXPECT_EQ(b.send_count, 5u);
  EXPECT_EQ(b.size_bytes, 60u);
  b = collective_buffers("alltoall", 8, 8, 4);  // 2 floats over 8 ranks: nothing to send
  EXPECT_EQ(b.size_bytes, 0u);
  b = collective_buffers("allreduce", 8, 1, 4);  // one rank: a 1-rank communicator
  EXPECT_EQ(b.size_bytes, 8u);
  EXPECT_DOUBLE_EQ(b.bus_factor, 0.0);
  EXPECT_DOUBLE_EQ(collective_buffers("allgather", 1024, 1, 4).bus_factor, 0.0);
  EXPECT_THROW(collective_buffers("allreduce_", 8, 2, 4), std::logic_error);
  EXPECT_EQ(collective_ops().size(), 7u);
  EXPECT_DOUBLE_EQ(algbw_GBps(1000000000, 0.5), 2.0);
}

TEST(GemmShapes, DefaultsHoldSquaresAndLlamaProjections) {
  const std::vector<GemmShape> shapes = default_gemm_shapes(false);
  ASSERT_EQ(shapes.size(), 19u);
  EXPECT_EQ(shapes.front().m, 256);
  EXPECT_EQ(shapes[6].m, 16384);
  const GemmShape& fwd = shapes[7];  // q/o forward
  EXPECT_EQ(fwd.m, 16384);
  EXPECT_EQ(fwd.n, 4096);
  EXPECT_EQ(fwd.k, 4096);
  EXPECT_EQ(fwd.layout, "NT");
  const GemmShape& down_wgrad = shapes[18];
  EXPECT_EQ(down_wgrad.m, 4096);
  EXPECT_EQ(down_wgrad.n, 14336);
  EXPECT_EQ(down_wgrad.k, 16384);
  EXPECT_EQ(down_wgrad.layout, "TN");
  EXPECT_EQ(default_gemm_shapes(true).size(), 3u);
  EXPECT_DOUBLE_EQ(gemm_flops({2, 3, 4, 5, "NN", ""}), 240.0);
}

TEST(GemmShapes, ForwardLinearIsPyTorchsCublasCall) {
  // torch.nn.functional.linear(x[T, in], W[out, in]) calls cublas gemm(T, N, out, T, in, W, in, x, in, y, out).
  const CublasGemmCall call = cublas_call({16384, 1024, 4096, 1, "NT", ""});
  EXPECT_TRUE(call.transpose_first);
  EXPECT_FALSE(call.transpose_second);
  EXPECT_EQ(call.m, 1024);
  EXPECT_EQ(call.n, 16384);
  EXPECT_EQ(call.k, 4096);
  EXPECT_EQ(call.ld_first, 4096);
  EXPECT_EQ(call.ld_second, 4096);
  EXPECT_EQ(call.ld_c, 1024);
  const CublasGemmCall nn = cublas_call({100, 200, 300, 2, "NN", ""});
  EXPECT_FALSE(nn.transpose_first);
  EXPECT_FALSE(nn.transpose_second);
  EXPECT_EQ(nn.ld_first, 200);
  EXPECT_EQ(nn.ld_second, 300);
  EXPECT_EQ(nn.stride_first, 300 * 200);
  EXPECT_EQ(nn.stride_second, 100 * 300);
  EXPECT_EQ(nn.stride_c, 100 * 200);
  const CublasGemmCall tn = cublas_call({100, 200, 300, 1, "TN", ""});
  EXPECT_TRUE(tn.transpose_second);
  EXPECT_EQ(tn.ld_second, 100);
}

// Emulates cuBLAS's column-major GEMM on the storage the harness fills, and checks it against
// the reference element: proves the call mapping and the reference agree for every layout.
TEST(GemmShapes, CublasMappingComputesTheReferenceProduct) {
  for (const char* layout : {"NN", "NT", "TN"}) {
    const GemmShape shape{5, 3, 4, 2, layout, ""};
    const CublasGemmCall call = cublas_call(shape);
    std::vector<double> a(static_cast<std::size_t>(shape.m * shape.k * shape.batch));
    std::vector<double> b(static_cast<std::size_t>(shape.k * shape.n * shape.batch));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = gemm_input_value("fp32", 1, i);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = gemm_input_value("fp32", 2, i);
    for (int64_t member = 0; member < shape.batch; ++member) {
      // cuBLAS: C'(i, j) = sum_l op(first)(i, l) * op(second)(l, j), column-major, C' at i + j*ldc.
      for (int64_t i = 0; i < call.m; ++i) {
        for (int64_t j = 0; j < call.n; ++j) {
          double sum = 0;
          for (int64_t l = 0; l < call.k; ++l) {
            const double* first = b.data() + member * call.stride_first;
            const double* second = a.data() + member * call.stride_second;
            const double f = call.transpose_first ? first[l + i * call.ld_first] : first[i + l * call.ld_first];
            const double s = call.transpose_second ? second[j + l * call.ld_second] : second[l + j * call.ld_second];
            sum += f * s;
          }
          // C' column-major (i, j) is row-major C (row j, col i).
          EXPECT_EQ(i + j * call.ld_c, gemm_output_offset(shape, 0, j, i));
          const GemmReference ref = gemm_reference_element(shape, "fp32", 1, 2, member, j, i);
          EXPECT_NEAR(sum, ref.value, 1e-12) << layout;
        }
      }
    }
  }
}

TEST(GemmReference, InputsAreRoundedLikeTheGpuFill) {
  const float x = gemm_input_value("fp32", 5, 9);
  EXPECT_EQ(gemm_input_value("tf32", 5, 9), x);
  EXPECT_NEAR(gemm_input_value("bf16", 5, 9), x, std::fabs(x) * 0x1p-8);
  EXPECT_NEAR(gemm_input_value("fp16", 5, 9), x, std::fabs(x) * 0x1p-11 + 0x1p-25);
  const GemmReference ref{10.0, 100.0};
  EXPECT_NEAR(gemm_tolerance("fp32", ref), 0.01 + 1e-5, 1e-12);
  EXPECT_GT(gemm_tolerance("bf16", ref), gemm_tolerance("fp16", ref));
}

TEST(RunInfo, DatesAndVersions) {
  EXPECT_EQ(utc_date(0), "1970-01-01");
  EXPECT_EQ(utc_time(3661), "01:01:01Z");
  EXPECT_EQ(utc_date(1795000000), "2026-11-18");
  EXPECT_EQ(format_cuda_version(13000), "13.0");
  EXPECT_EQ(format_cuda_version(12040), "12.4");
  EXPECT_EQ(format_nccl_version(22707), "2.27.7");
  EXPECT_EQ(format_nccl_version(2708), "2.7.8");
}

TEST(RunInfo, DriverVersionFromProc) {
  EXPECT_EQ(parse_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
                                 "GCC version:  gcc version 12.2.0\n"),
            "535.104.05");
  EXPECT_EQ(parse_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
                                 "(dvs-builder@U16)  Thu Jan 23 2025\n"),
            "570.86.15");
  EXPECT_EQ(parse_driver_version(""), "");
  EXPECT_EQ(parse_driver_version("GCC version: 12.2.0"), "");
}

TEST(RunInfo, ShellJoinQuotesWhatNeedsIt) {
  EXPECT_EQ(shell_join({"stepsim-harness", "nccl", "--max", "8GiB"}), "stepsim-harness nccl --max 8GiB");
  EXPECT_EQ(shell_join({"x", "--shapes", "1,2,3;4,5,6", "--notes", "it's"}), "x --shapes '1,2,3;4,5,6' --notes 'it'\\''s'");
  EXPECT_EQ(shell_join({"x", ""}), "x ''");
}

TEST(RunInfo, OutputFolderCheck) {
  EXPECT_TRUE(output_folder_writable("file-in-current-folder.yaml"));
  EXPECT_TRUE(output_folder_writable(::testing::TempDir() + "out.yaml"));
  EXPECT_FALSE(output_folder_writable("/no/such/folder/out.yaml"));
}

}  // namespace
}  // namespace stepsim::harness
