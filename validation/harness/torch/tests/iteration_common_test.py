"""Unit tests of iteration_common.py, the torch-free logic of the PyTorch iteration scripts:
python3 validation/harness/torch/tests/iteration_common_test.py (meson: torch_scripts_logic)."""
import json
import math
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import iteration_common as common  # noqa: E402

try:
    import yaml
except ImportError:  # the round-trip test needs PyYAML; the rest is stdlib only
    yaml = None

LLAMA = common.read_preset("llama3-8b")
DLRM = common.read_preset("dlrm-criteo-1tb")


class SpreadTest(unittest.TestCase):
    def test_mean_min_max_and_sample_stdev(self):
        s = common.spread([1.0, 2.0, 3.0, 6.0])
        self.assertEqual(s["repetitions"], 4)
        self.assertEqual((s["mean_s"], s["min_s"], s["max_s"]), (3.0, 1.0, 6.0))
        self.assertAlmostEqual(s["stdev_s"], math.sqrt(14 / 3))

    def test_spread_entry_is_the_schema_mapping_without_the_mean(self):
        s = common.spread([1.0, 3.0])
        self.assertEqual(common.spread_entry(s), {"repetitions": 2, "min_s": 1.0, "max_s": 3.0,
                                                  "stdev_s": s["stdev_s"]})

    def test_one_repetition_has_no_spread_and_none_is_an_error(self):
        self.assertEqual(common.spread([0.5])["stdev_s"], 0.0)
        with self.assertRaises(ValueError):
            common.spread([])


class PresetTest(unittest.TestCase):
    def test_scalars_of_the_llama_preset(self):
        s = common.preset_scalars(LLAMA)
        self.assertEqual(s["kind"], "fsdp")
        self.assertEqual((s["model.layers"], s["model.kv_heads"], s["model.vocab"]), ("32", "8", "128256"))
        self.assertEqual((s["training.micro_batch"], s["training.sequence"], s["training.max_norm"]), ("2", "8192", "1.0"))
        self.assertEqual((s["fsdp.strategy"], s["fsdp.activation_checkpointing"]), ("FULL_SHARD", "selective"))

    def test_scalars_skip_lists_and_deeper_levels(self):
        s = common.preset_scalars(DLRM)
        self.assertEqual((s["training.global_batch"], s["model.embedding_dim"]), ("65536", "128"))
        self.assertEqual((s["sharding.plan"], s["index_distribution.kind"]), ("table_wise", "uniform"))
        self.assertNotIn("model.bottom_mlp", s)
        self.assertNotIn("model.tables", s)
        self.assertFalse(any(k.endswith(("rows", "pooling")) for k in s))

    def test_lists_of_the_dlrm_preset(self):
        rows = common.preset_list(DLRM, "rows")
        self.assertEqual(len(rows), 26)
        self.assertEqual(sum(rows), 187767399)  # the preset's comment: 187,767,399 rows
        self.assertEqual(common.preset_list(DLRM, "bottom_mlp"), [512, 256, 128])
        self.assertEqual(common.preset_list(DLRM, "top_mlp"), [1024, 1024, 512, 256, 1])

    def test_replacing_rows_keeps_everything_else(self):
        capped = common.capped_rows(common.preset_list(DLRM, "rows"), 10_000_000)
        text = common.replace_preset_list(DLRM, "rows", capped)
        self.assertEqual(common.preset_list(text, "rows"), capped)
        self.assertEqual(common.preset_scalars(text), common.preset_scalars(DLRM))
        self.assertEqual(text.count("\n"), DLRM.count("\n") - 1)  # the two-line list is now one line
        if yaml:
            self.assertEqual(yaml.safe_load(text)["model"]["tables"]["rows"], capped)


    def test_dropping_a_scalar_removes_only_its_line(self):
        self.assertIn("training.graph_scope", common.preset_scalars(DLRM))
        text = common.drop_preset_scalar(DLRM, "training.graph_scope")
        expected = dict(common.preset_scalars(DLRM))
        del expected["training.graph_scope"]
        self.assertEqual(common.preset_scalars(text), expected)
        self.assertEqual(text.count("\n"), DLRM.count("\n") - 1)
        self.assertEqual(common.drop_preset_scalar(text, "training.graph_scope"), text)
        self.assertEqual(common.drop_preset_scalar(DLRM, "model.graph_scope"), DLRM)  # the key of another section


class OverridesTest(unittest.TestCase):
    LLAMA_RUN = {"model.layers": 32, "model.hidden": 4096, "model.heads": 32, "model.kv_heads": 8,
                 "model.ffn_hidden": 14336, "model.vocab": 128256, "training.micro_batch": 2,
                 "training.sequence": 8192, "training.gradient_accumulation": 1, "training.param_dtype": "bf16",
                 "training.reduce_dtype": "fp32", "training.optimizer": "adamw", "training.max_norm": 1.0,
                 "fsdp.strategy": "FULL_SHARD", "fsdp.activation_checkpointing": "selective", "fsdp.wrap": "layer"}

    def test_the_preset_itself_needs_none(self):
        self.assertEqual(common.overrides(LLAMA, self.LLAMA_RUN), [])

    def test_each_difference_is_one_override_in_simulate_syntax(self):
        run = dict(self.LLAMA_RUN, **{"model.layers": 4, "training.micro_batch": 1, "fsdp.activation_checkpointing": "none"})
        self.assertEqual(common.overrides(LLAMA, run), ["workload.model.layers=4", "workload.training.micro_batch=1",
                                                        "workload.fsdp.activation_checkpointing=none"])

    def test_keys_the_preset_lacks_are_stated_and_booleans_compare_as_booleans(self):
        run = {"training.global_batch": 65536, "training.cuda_graphs": False, "sharding.planner": "naive",
               "sharding.bottom_mlp": "data_parallel", "training.ddp_bucket": "25MiB",
               "index_distribution.kind": "zipf", "index_distribution.alpha": 1.05}
        self.assertEqual(common.overrides(DLRM, run), [
            "workload.training.cuda_graphs=false", "workload.sharding.planner=naive",
            "workload.sharding.bottom_mlp=data_parallel", "workload.index_distribution.kind=zipf",
            "workload.index_distribution.alpha=1.05"])
        self.assertEqual(common.overrides(DLRM, {"training.cuda_graphs": True}), [])


class SizesTest(unittest.TestCase):
    def test_llama3_8b_parameters(self):
        self.assertEqual(common.llama_params(32, 4096, 32, 8, 14336, 128256), 8_030_261_248)

    def test_rows_cap(self):
        rows = common.preset_list(DLRM, "rows")
        capped = common.capped_rows(rows, 10_000_000)
        self.assertEqual(sum(r > 10_000_000 for r in rows), 5)
        self.assertEqual(max(capped), 10_000_000)
        self.assertEqual(common.capped_rows(rows, 0), rows)
        # The README's figure: 54.1M rows, 27.7 GB of fp32 tables at dimension 128.
        self.assertAlmostEqual(sum(capped) * 128 * 4 / 1e9, 27.7, places=1)

    def test_naive_placement_covers_every_table_once(self):
        for ranks in range(1, 9):
            placed = sorted(t for r in range(ranks) for t in common.tables_of_rank(26, ranks, r))
            self.assertEqual(placed, list(range(26)))

    def test_alltoall_splits_match_between_peers(self):
        for ranks in range(1, 9):
            splits = [common.alltoall_splits(26, ranks, r, 8192, 128) for r in range(ranks)]
            for i in range(ranks):
                for j in range(ranks):
                    self.assertEqual(splits[i][0][j], splits[j][1][i])  # what i sends j is what j expects from i
            # every rank receives all 26 tables for its own samples
            self.assertTrue(all(sum(receive) == 26 * 8192 * 128 for _, receive in splits))


class SystemTest(unittest.TestCase):
    def test_gpu_names(self):
        self.assertEqual(common.gpu_model("NVIDIA H100 80GB HBM3"), "H100-SXM5-80GB")
        self.assertEqual(common.platform_of("H100-SXM5-80GB"), "dgx-h100")
        self.assertEqual(common.gpu_model("NVIDIA H200"), "H200-SXM5-141GB")
        self.assertEqual(common.platform_of(common.gpu_model("NVIDIA H100 PCIe")), "")

    def test_gpu_list(self):
        self.assertEqual(common.gpu_list(1, None), "0")
        self.assertEqual(common.gpu_list(4, ""), "0,1,2,3")
        self.assertEqual(common.gpu_list(2, "3,5,7"), "3,5")
        self.assertEqual(common.gpu_list(1, "GPU-1a2b"), "")

    def test_command_line(self):
        argv = ["/x/fsdp_iteration.py", "--layers", "4"]
        self.assertEqual(common.command_line(argv, 1, 1), "fsdp_iteration.py --layers 4")
        self.assertEqual(common.command_line(argv, 8, 8), "torchrun --nproc-per-node 8 fsdp_iteration.py --layers 4")
        self.assertEqual(common.command_line(argv, 16, 8),
                         "torchrun --nnodes 2 --nproc-per-node 8 fsdp_iteration.py --layers 4")

    def test_single_rank_env_only_without_torchrun(self):
        env = common.single_rank_env({}, 29511)
        self.assertEqual((env["WORLD_SIZE"], env["RANK"], env["MASTER_PORT"]), ("1", "0", "29511"))
        self.assertEqual(common.single_rank_env({"WORLD_SIZE": "8"}, 29511), {})


TRACE = {"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 100.0, "tid": 7, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 50.0, "tid": 7, "args": {"stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "dur": 120.0, "tid": 20, "args": {"stream": 20}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 10.0, "tid": 20, "args": {"stream": 20}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 900.0, "tid": 1},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "dur": 500.0, "tid": 7},
    {"ph": "f", "cat": "ac2g", "name": "flow", "tid": 7},
    {"ph": "X", "cat": "kernel", "name": "elementwise", "dur": 1.0, "tid": 7, "args": {"stream": 7}},
]}


class TraceTest(unittest.TestCase):
    def test_kernels_by_total_time_per_stream(self):
        kernels = common.kernel_totals(TRACE, 10)
        self.assertEqual([(k["name"], k["count"], k.get("stream")) for k in kernels],
                         [("gemm", 2, 7), ("ncclDevKernel_AllGather", 1, 20), ("gemm", 1, 20), ("elementwise", 1, 7)])
        self.assertAlmostEqual(kernels[0]["time_s"], 150e-6)

    def test_top_n(self):
        self.assertEqual(len(common.kernel_totals(TRACE, 2)), 2)
        self.assertEqual(common.kernel_totals({"traceEvents": []}, 5), [])

    def test_launch_count_counts_gpu_kernels_only(self):
        # Five kernels; the CPU op, the copy and the flow event are not launches of a kernel.
        self.assertEqual(common.kernel_launch_count(TRACE), 5)
        self.assertEqual(common.kernel_launch_count({"traceEvents": []}), 0)


class WriterTest(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(common.yaml_number(1e-05), "1.0e-05")
        self.assertEqual(common.yaml_number(2.31e-05), "2.31e-05")
        self.assertEqual(common.yaml_number(0.5), "0.5")
        self.assertEqual(common.yaml_number(65536), "65536")
        for bad in (float("inf"), float("nan")):
            with self.assertRaises(ValueError):
                common.yaml_number(bad)
        with self.assertRaises(TypeError):
            common.yaml_number(True)

    def test_texts_are_quoted(self):
        self.assertEqual(common.yaml_text("13.0"), '"13.0"')
        self.assertEqual(common.yaml_text('void k<"a">: x # y'), json.dumps('void k<"a">: x # y'))

    def file_text(self):
        source = {"tool": "torch fsdp_iteration.py", "command": "fsdp_iteration.py --out x.yaml", "date": "2026-01-02",
                  "notes": "tokens_per_s is per GPU"}
        system = {"platform": "dgx-h100", "gpu": "NVIDIA H100 80GB HBM3", "gpu_model": "H100-SXM5-80GB", "gpus": 1,
                  "nodes": 1, "gpu_list": "0", "software": {"torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.27.7"}}
        measurements = [common.iteration_entry("llama3-8b", [0.5, 0.52, 0.51], ["workload.model.layers=4"],
                                               ("tokens_per_s", 16384))]
        measurements += common.kernel_entries(TRACE, 2)
        return common.format_measurements(source, system, measurements)

    def test_layout_follows_the_schema(self):
        text = self.file_text()
        self.assertTrue(text.startswith("# stepsim measurement file (schema: docs/measurements.md)\nversion: 1\nsource:\n  tool: "))
        self.assertIn('\n  - kind: "iteration"\n    workload: "llama3-8b"\n    time_s: 0.51', text)
        self.assertLess(text.index("tokens_per_s:"), text.index("spread:"))  # the schema's key order
        self.assertIn('\n    params: ["workload.model.layers=4"]\n', text)
        self.assertIn('\n  software: {torch: "2.11.0+cu130", cuda: "13.0", nccl: "2.27.7"}\n', text)
        self.assertIn('\n    stream: 7\n', text)

    @unittest.skipIf(yaml is None, "PyYAML is not installed")
    def test_round_trip(self):
        doc = yaml.safe_load(self.file_text())
        self.assertEqual(doc["system"]["software"]["cuda"], "13.0")
        iteration, kernel = doc["measurements"][0], doc["measurements"][1]
        self.assertAlmostEqual(iteration["time_s"], 0.51)
        self.assertEqual(iteration["spread"], {"repetitions": 3, "min_s": 0.5, "max_s": 0.52,
                                               "stdev_s": iteration["spread"]["stdev_s"]})
        self.assertAlmostEqual(iteration["spread"]["stdev_s"], 0.01)
        self.assertAlmostEqual(iteration["tokens_per_s"], 16384 / 0.51)
        self.assertEqual(kernel, {"kind": "kernel", "name": "gemm", "time_s": 150e-6, "count": 2, "stream": 7})


if __name__ == "__main__":
    unittest.main()
