#pragma once
/// @file Embedding-table sharding for DLRM: how a model's tables are split over the ranks of a
/// job, and the planners that choose a table-wise placement.
///
/// Contract: plan_sharding is pure and deterministic (the `random` planner draws from
/// std::mt19937_64 seeded with `seed`, whose output the C++ standard fixes). Every table ends
/// on exactly the ranks its kind says (table-wise: one rank; row-wise and data-parallel: every
/// rank; table-row-wise: every rank of one node; column-wise: the ranks listed). A plan whose embedding bytes on some rank exceed `gpu_memory - memory_reserve` throws
/// ConfigError naming the rank, its bytes and the capacity, and suggesting what would fit. The
/// planners are usable on their own (a sweep over plans calls plan_sharding directly).
#include <cstdint>
#include <optional>
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
  /// A sequence feature (TorchRec's EmbeddingCollection): every lookup's row is an output of its
  /// own, not summed into one per sample.
  bool sequence = false;
  /// @brief What `rows` x `dim` of the table take on a GPU, its optimizer state included.
  Bytes stored(double rows_held, double dim_held) const {
    return rows_held * (dim_held * (element_bytes + state_per_value) + state_per_row);
  }
  Bytes bytes() const { return stored(rows, dim); }
};

/// @brief How tables are split (TorchRec's sharding types).
enum class ShardingKind : std::uint8_t {
  table_wise,      ///< each table whole on one rank; a planner picks the rank
  row_wise,        ///< a table's rows split in contiguous blocks over all ranks
  column_wise,     ///< a table's columns (dim) split in blocks over its ranks
  table_row_wise,  ///< a table's rows split in blocks over the ranks of one node
  data_parallel,   ///< a table replicated on every rank
};
const char* to_string(ShardingKind kind);
/// @brief Every sharding kind, in declaration order.
const std::vector<ShardingKind>& sharding_kinds();
/// @brief The kind to_string names `name`, or nothing.
std::optional<ShardingKind> sharding_kind(const std::string& name);

/// @brief How one table is split and which ranks hold its shards, in shard order: TorchRec's
/// ParameterSharding (sharding_type, ranks). Empty `ranks` means every rank of the job
/// (row_wise and data_parallel only).
struct TableSharding {
  ShardingKind kind = ShardingKind::table_wise;
  std::vector<int> ranks;

  /// @brief Rows of the table's shard on `rank`: row_wise and table_row_wise hold TorchRec's
  /// contiguous blocks of ceil(E/k) rows over their k ranks, so the last may hold fewer or none;
  /// 0 on a rank that holds no shard.
  double rows_on(const EmbeddingTable& table, int rank) const;
  /// @brief Columns of the shard on `rank` (column_wise: blocks of ceil(D/k) columns); 0 where none.
  int dim_on(const EmbeddingTable& table, int rank) const;
  /// @brief Whether `rank` holds a shard (possibly an empty last block).
  bool holds(int rank) const { return position(rank) >= 0; }

 private:
  int position(int rank) const;
};

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
  /// When not empty, every table's sharding (one entry per table, as TorchRec prints a plan),
  /// used instead of `kind`, the planner and `placement`; the plan's planner is then "per_table".
  std::vector<TableSharding> per_table;
  /// The node of every rank: a table_row_wise table's ranks must be one node's, all of them.
  std::vector<int> node_of_rank;
  Bytes gpu_memory = 0;                         ///< per GPU; 0 = no memory check
  Bytes memory_reserve = 0;                     ///< kept free for context, workspaces, activations
  std::string gpu_name;                         ///< for the memory error message
  std::string where = "sharding";               ///< names the request in errors (file: path (line))
};

/// @brief Where every table lives: its sharding, and per rank the tables it holds a shard of
/// (table_wise plans list them in the order the planner placed them, the others in table order).
struct ShardingPlan {
  std::string planner;                          ///< whole tables: the planner, "placement", or "per_table"
  int ranks = 0;
  std::vector<TableSharding> tables;            ///< per table, its ranks always listed
  std::vector<std::vector<int>> tables_of_rank;
  std::vector<Bytes> bytes_of_rank;             ///< bytes each rank stores: its shards and their optimizer state

  /// @brief The sharding kinds the plan uses, in the order of their first table: TorchRec runs
  /// one lookup and one exchange per kind.
  std::vector<ShardingKind> kinds() const;
  /// @brief The one kind of every table, or nothing when they differ.
  std::optional<ShardingKind> kind() const;
};

/// @brief Splits `request.tables` over `request.ranks`; throws ConfigError naming
/// `request.where` for an unknown planner, an empty or invalid table, a placement or per-table
/// plan of the wrong length, with a rank out of range, a placement with a kind other than
/// table_wise, per-table ranks that do not fit their kind, or a rank whose shards do not fit.
ShardingPlan plan_sharding(const ShardingRequest& request);

}  // namespace stepsim::workloads
