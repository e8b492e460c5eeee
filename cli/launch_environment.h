#pragma once
// Where `metron run` is one rank of a run that another launcher started: torchrun (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT), srun (SLURM_PROCID, SLURM_NTASKS, the first host of
// SLURM_JOB_NODELIST) or mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, MASTER_ADDR passed
// with -x). Without any of them, `metron run` launches its own ranks.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace metron::cli {

/// This process's place in an externally launched run.
struct ExternalRank {
  std::string launcher;  ///< "torchrun", "srun" or "mpirun"
  std::int32_t rank = 0;
  std::int32_t world_size = 1;
  std::string host;  ///< where rank 0 hosts metron's store
  /// The launcher's port (MASTER_PORT), if it named one; metron's store uses the next one,
  /// because torchrun's own agent store already listens on MASTER_PORT.
  std::optional<std::int32_t> master_port;
  /// The rank's index on its machine, where the launcher says (LOCAL_RANK, SLURM_LOCALID,
  /// OMPI_COMM_WORLD_LOCAL_RANK): the GPU a CUDA rank runs on.
  std::optional<std::int32_t> local_rank;
};

/// Reads the environment through `getenv` (std::getenv in the program; a map in tests).
/// Returns nullopt when no launcher's variables are set; throws InvalidConfig naming the
/// variable when one is set but malformed or incomplete.
std::optional<ExternalRank> external_rank(const std::function<const char*(const char*)>& getenv);

/// The first host of a Slurm node list: "gpu[03-05,9],cpu1" gives "gpu03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace metron::cli
