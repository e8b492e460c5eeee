#include "launch_environment.h"

#include <charconv>
#include <string_view>

#include "metron/base/error.h"

namespace metron::cli {
namespace {

std::int32_t integer_variable(const char* name, const char* value) {
  const std::string_view text(value);
  std::int32_t out = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (error != std::errc() || end != text.data() + text.size() || out < 0) {
    throw InvalidConfig(std::string("environment variable ") + name +
                        ": expected a non-negative integer; got '" + std::string(text) + "'");
  }
  return out;
}

// MASTER_PORT: rank 0 serves metron's store on the port after it (run_command.cc), so that a
// launcher's own store on MASTER_PORT (torchrun's) is left alone.
std::int32_t port_variable(const char* value) {
  const std::int32_t port = integer_variable("MASTER_PORT", value);
  if (port < 1 || port > 65534) {
    throw InvalidConfig(
        "environment variable MASTER_PORT: expected a port from 1 to 65534 (metron's store "
        "listens on MASTER_PORT + 1); got '" +
        std::string(value) + "'");
  }
  return port;
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  const std::string first = nodelist.substr(0, nodelist.find(','));
  const std::size_t bracket = nodelist.find('[');
  if (bracket == std::string::npos || bracket > first.size()) return first;
  // "gpu[03-05,9]": the prefix and the first number of the range, leading zeros kept.
  const std::size_t end = nodelist.find_first_of("-,]", bracket + 1);
  return nodelist.substr(0, bracket) + nodelist.substr(bracket + 1, end - bracket - 1);
}

std::optional<ExternalRank> external_rank(const std::function<const char*(const char*)>& getenv) {
  const auto need = [&](const char* name, const std::string& launcher) -> const char* {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') {
      throw InvalidConfig("environment variable " + std::string(name) + ": expected it set for " +
                          launcher + " (set alongside the launcher's other variables)");
    }
    return value;
  };
  ExternalRank out;
  if (getenv("RANK") != nullptr && getenv("WORLD_SIZE") != nullptr) {
    out.launcher = "torchrun";
    out.rank = integer_variable("RANK", getenv("RANK"));
    out.world_size = integer_variable("WORLD_SIZE", getenv("WORLD_SIZE"));
    out.host = need("MASTER_ADDR", out.launcher);
    out.master_port = port_variable(need("MASTER_PORT", out.launcher));
    if (const char* local = getenv("LOCAL_RANK")) {
      out.local_rank = integer_variable("LOCAL_RANK", local);
    }
  } else if (getenv("OMPI_COMM_WORLD_RANK") != nullptr) {
    out.launcher = "mpirun";
    out.rank = integer_variable("OMPI_COMM_WORLD_RANK", getenv("OMPI_COMM_WORLD_RANK"));
    out.world_size =
        integer_variable("OMPI_COMM_WORLD_SIZE", need("OMPI_COMM_WORLD_SIZE", out.launcher));
    if (const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
      out.local_rank = integer_variable("OMPI_COMM_WORLD_LOCAL_RANK", local);
    }
    const char* host = getenv("MASTER_ADDR");
    out.host = host != nullptr ? host : "127.0.0.1";
    if (const char* port = getenv("MASTER_PORT")) {
      out.master_port = port_variable(port);
    }
  } else if (getenv("SLURM_PROCID") != nullptr) {
    out.launcher = "srun";
    out.rank = integer_variable("SLURM_PROCID", getenv("SLURM_PROCID"));
    out.world_size = integer_variable("SLURM_NTASKS", need("SLURM_NTASKS", out.launcher));
    if (const char* local = getenv("SLURM_LOCALID")) {
      out.local_rank = integer_variable("SLURM_LOCALID", local);
    }
    const char* host = getenv("MASTER_ADDR");
    out.host = host != nullptr ? host : first_slurm_host(need("SLURM_JOB_NODELIST", out.launcher));
    if (const char* port = getenv("MASTER_PORT")) {
      out.master_port = port_variable(port);
    }
  } else {
    return std::nullopt;
  }
  if (out.rank >= out.world_size) {
    throw InvalidConfig(out.launcher + ": rank " + std::to_string(out.rank) +
                        " is not below the world size " + std::to_string(out.world_size));
  }
  return out;
}

}  // namespace metron::cli
