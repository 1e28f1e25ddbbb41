#pragma once
/// @file Embedding-table sharding for DLRM: how a model's tables are split over the ranks of a
/// job, and the planners that choose a table-wise placement.
///
/// Contract: plan_sharding is pure and deterministic (the `random` planner draws from
/// std::mt19937_64 seeded with `seed`, whose output the C++ standard fixes). Every table ends
/// on exactly the ranks its kind says (table-wise: one rank; the other kinds: a shard on every
/// rank). A plan whose embedding bytes on some rank exceed `gpu_memory - memory_reserve` throws
/// ConfigError naming the rank, its bytes and the capacity, and suggesting what would fit. The
/// planners are usable on their own (a sweep over plans calls plan_sharding directly).
#include <cstdint>
#include <string>
#include <vector>

#include "platforms/units.hpp"

namespace stepsim::workloads {

/// @brief One embedding table as the planners and the DLRM generator see it.
struct EmbeddingTable {
  std::string name;
  double rows = 0;             ///< hash size E
  int dim = 0;                 ///< embedding dimension D
  double pooling = 1;          ///< mean lookups per sample L (pooling factor)
  Bytes element_bytes = 4;     ///< bytes per stored value (fp32 4, fp16 2)
  Bytes state_per_value = 0;   ///< optimizer state stored beside each value (Adagrad 4, Adam 8)
  Bytes state_per_row = 0;     ///< optimizer state per row (row-wise Adagrad 4)
  /// @brief What `rows` x `dim` of the table take on a GPU, its optimizer state included.
  Bytes stored(double rows_held, double dim_held) const {
    return rows_held * (dim_held * (element_bytes + state_per_value) + state_per_row);
  }
  Bytes bytes() const { return stored(rows, dim); }
};

/// @brief How tables are split (TorchRec's sharding types).
enum class ShardingKind : std::uint8_t {
  table_wise,      ///< each table whole on one rank; a planner picks the rank
  row_wise,        ///< each table's rows split in contiguous blocks over all ranks
  column_wise,     ///< each table's columns (dim) split in blocks over all ranks
  data_parallel,   ///< every table replicated on every rank
};
const char* to_string(ShardingKind kind);

struct PlannerInfo {
  std::string name;
  std::string description;
};
/// @brief The table-wise planners, in the order `--help` and errors list them.
const std::vector<PlannerInfo>& sharding_planners();

struct ShardingRequest {
  std::vector<EmbeddingTable> tables;
  int ranks = 1;
  ShardingKind kind = ShardingKind::table_wise;
  std::string planner = "size_lookup_greedy";   ///< table_wise only; one of sharding_planners()
  std::uint64_t seed = 0;                       ///< the `random` planner's seed
  /// table_wise only: when not empty, the rank of every table (one entry per table), used
  /// instead of the planner; the plan's planner is then "placement".
  std::vector<int> placement;
  Bytes gpu_memory = 0;                         ///< per GPU; 0 = no memory check
  Bytes memory_reserve = 0;                     ///< kept free for context, workspaces, activations
  std::string gpu_name;                         ///< for the memory error message
  std::string where = "sharding";               ///< names the request in errors (file: path (line))
};

/// @brief Where every table lives. For table_wise, `tables_of_rank[r]` lists the whole tables
/// rank r holds (each table on exactly one rank). For the other kinds every rank holds a shard
/// of every table, so every rank lists every table; `rows_of` / `dim_of` give the shard.
struct ShardingPlan {
  ShardingKind kind = ShardingKind::table_wise;
  std::string planner;                          ///< table_wise: the planner that chose it
  int ranks = 0;
  std::vector<std::vector<int>> tables_of_rank;
  std::vector<Bytes> bytes_of_rank;             ///< bytes each rank stores: its shards and their optimizer state

  /// @brief Rows of the shard of `table` on `rank`, for a table that `rank` lists (row_wise:
  /// TorchRec's contiguous blocks of ceil(E/n) rows, so the last ranks may hold fewer or none).
  double rows_of(const EmbeddingTable& table, int rank) const;
  /// @brief Columns of the shard of `table` on `rank`, for a table that `rank` lists
  /// (column_wise: blocks of ceil(D/n) columns, so the last ranks may hold fewer or none).
  int dim_of(const EmbeddingTable& table, int rank) const;
};

/// @brief Splits `request.tables` over `request.ranks`; throws ConfigError naming
/// `request.where` for an unknown planner, an empty or invalid table, a placement of the wrong
/// length, with a rank out of range or with a kind other than table_wise, or a rank whose
/// tables do not fit.
ShardingPlan plan_sharding(const ShardingRequest& request);

}  // namespace stepsim::workloads
