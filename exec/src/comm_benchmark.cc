// Note [communication benchmark] (comm_benchmark.h).

#include "metron/exec/comm_benchmark.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "metron/base/error.h"
#include "metron/exec/torch_compute.h"

namespace metron::exec {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Shortest round-trip text: rank 0 reads back exactly the doubles each rank measured.
std::string encode(const std::vector<double>& values) {
  std::string out;
  std::array<char, 32> buffer{};
  for (const double v : values) {
    const auto end = std::to_chars(buffer.data(), buffer.data() + buffer.size(), v).ptr;
    out += (out.empty() ? "" : " ") + std::string(buffer.data(), end);
  }
  return out;
}

std::vector<double> decode(const std::string& text) {
  std::vector<double> out;
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  while (at < end) {
    double v = 0;
    const auto [next, error] = std::from_chars(at, end, v);
    if (error != std::errc{}) break;
    out.push_back(v);
    at = next == end ? end : next + 1;  // past the space
  }
  return out;
}

std::string ranks_text(const std::vector<std::int32_t>& ranks) {
  std::string out;
  for (const std::int32_t r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// Transfers of the slow-down's load use tags of their own, clear of the transfer entries'.
constexpr std::int32_t kLoadTagBase = 1 << 30;

void check_rank(std::int32_t rank, std::int32_t world, const std::string& where) {
  if (rank < 0 || rank >= world) {
    throw InvalidConfig("communication benchmark: " + where + ": rank " + std::to_string(rank) +
                        " is outside 0.." + std::to_string(world - 1));
  }
}

void check_collective(const CollectiveProbe& p, const CommBenchmark& b, const std::string& where) {
  if (p.group < 0 || static_cast<std::size_t>(p.group) >= b.groups.size()) {
    throw InvalidConfig("communication benchmark: " + where + ": group " + std::to_string(p.group) +
                        " does not exist");
  }
}

void check_transfer(const TransferProbe& p, std::int32_t world, const std::string& where) {
  check_rank(p.sender, world, where);
  check_rank(p.receiver, world, where);
  if (p.sender == p.receiver) {
    throw InvalidConfig("communication benchmark: " + where +
                        ": sender and receiver are both rank " + std::to_string(p.sender));
  }
}

void check(const CommBenchmark& b, std::int32_t world) {
  if (b.repetitions < 1 || b.warmup < 0) {
    throw InvalidConfig("communication benchmark: expected repetitions >= 1 and warmup >= 0, got " +
                        std::to_string(b.repetitions) + " and " + std::to_string(b.warmup));
  }
  if (std::ssize(b.compute) > world) {
    throw InvalidConfig("communication benchmark: compute for " + std::to_string(b.compute.size()) +
                        " ranks in a world of " + std::to_string(world));
  }
  for (std::size_t i = 0; i < b.collectives.size(); ++i) {
    check_collective(b.collectives[i], b, "collective " + std::to_string(i));
  }
  for (std::size_t i = 0; i < b.transfers.size(); ++i) {
    check_transfer(b.transfers[i], world, "transfer " + std::to_string(i));
  }
  if (b.slowdown) {
    if (const auto* c = std::get_if<CollectiveProbe>(&b.slowdown->load)) {
      check_collective(*c, b, "slow-down load");
    } else {
      check_transfer(std::get<TransferProbe>(b.slowdown->load), world, "slow-down load");
    }
  }
}

/// One rank's part of a benchmark (Note [communication benchmark]).
class BenchmarkRank {
 public:
  BenchmarkRank(const CommBenchmark& b, const Rendezvous& r, const BenchmarkStatus& status)
      : b_(b), rank_(r.rank), status_(status), ordinals_(b.groups.size(), 0) {
    report("connecting to the store at " + r.host + ":" + std::to_string(r.port));
    world_ = std::make_unique<GlooWorld>(r, b.groups);
  }

  /// Publishes what this rank does now; an empty sink takes nothing.
  void report(std::string_view what) const {
    if (status_) status_(what);
  }

  /// Leaks the world (see measure_communication).
  void abandon() { static_cast<void>(world_.release()); }

  std::optional<CommMeasurement> run() {
    guarded("timing this rank's compute operations", [&] { time_compute(); });
    for (std::size_t i = 0; i < b_.collectives.size(); ++i) {
      guarded(describe(b_.collectives[i]), [&] { time_collective(i); });
    }
    for (std::size_t i = 0; i < b_.transfers.size(); ++i) {
      guarded(describe(b_.transfers[i]), [&] { time_transfer(i); });
    }
    if (b_.slowdown) guarded("the compute slow-down", [&] { time_slowdown(*b_.slowdown); });
    report("gathering the measurements at rank 0");
    std::optional<CommMeasurement> out;
    if (rank_ == 0) out = gather();
    // Nobody leaves before rank 0 has read everything from the store it hosts.
    world_->barrier();
    return out;
  }

 private:
  template <class Work>
  void guarded(const std::string& what, Work work) {
    report(what);
    try {
      work();
    } catch (const Error& e) {
      if (e.is_input_error()) throw;
      throw BackendError("rank " + std::to_string(rank_) + ": " + what + ": " + e.what());
    }
  }

  [[nodiscard]] std::string describe(const CollectiveProbe& p) const {
    return std::string(ir::to_string(p.call.op)) + " of " + std::to_string(p.call.bytes) +
           " bytes on group " + std::to_string(p.group) + " (ranks " + ranks_text(members(p)) + ")";
  }

  static std::string describe(const TransferProbe& p) {
    return "transfer of " + std::to_string(p.bytes) + " bytes from rank " +
           std::to_string(p.sender) + " to rank " + std::to_string(p.receiver);
  }

  [[nodiscard]] const std::vector<std::int32_t>& members(const CollectiveProbe& p) const {
    return b_.groups[static_cast<std::size_t>(p.group)];
  }

  [[nodiscard]] bool is_member(const CollectiveProbe& p) const {
    return std::ranges::find(members(p), rank_) != members(p).end();
  }

  void call(const CollectiveProbe& p) {
    world_->collective(p.group, ordinals_[static_cast<std::size_t>(p.group)]++, p.call);
  }

  static std::string collective_key(std::size_t i, std::int32_t rank) {
    return "metron/benchmark/collective/" + std::to_string(i) + "/" + std::to_string(rank);
  }
  static std::string transfer_key(std::size_t i) {
    return "metron/benchmark/transfer/" + std::to_string(i);
  }
  static std::string load_key(std::int64_t round) {
    return "metron/benchmark/load/" + std::to_string(round);
  }

  static std::string compute_key(std::int32_t rank) {
    return "metron/benchmark/compute/" + std::to_string(rank);
  }

  [[nodiscard]] const std::vector<ir::Compute>& my_compute() const {
    static const std::vector<ir::Compute> kNone;
    const auto r = static_cast<std::size_t>(rank_);
    return r < b_.compute.size() ? b_.compute[r] : kNone;
  }

  /// Note [communication benchmark], compute: this rank's operations, while the others time
  /// theirs. Samples are stored operation by operation, each with its `repetitions` times.
  void time_compute() {
    const std::vector<ir::Compute>& tasks = my_compute();
    std::optional<TorchCompute> torch;
    std::size_t operations = 0;
    if (!tasks.empty()) {
      torch.emplace(TorchCompute::Options{.intra_op_threads = b_.intra_op_threads});
      for (const ir::Compute& task : tasks) {
        for (const ir::Operation& op : task.operations) {
          torch->prepare(ir::Compute{.operations = {op}});
          ++operations;
        }
      }
    }
    std::vector<const ir::Operation*> ops;
    ops.reserve(operations);
    for (const ir::Compute& task : tasks) {
      for (const ir::Operation& op : task.operations) ops.push_back(&op);
    }
    // Lockstep: the j-th operation of every rank starts after one barrier (Note [communication
    // benchmark]), so a rank with fewer operations passes the barriers of the others' rest.
    std::size_t slots = 0;
    for (const std::vector<ir::Compute>& rank_tasks : b_.compute) {
      std::size_t n = 0;
      for (const ir::Compute& task : rank_tasks) n += task.operations.size();
      slots = std::max(slots, n);
    }
    std::vector<std::vector<double>> samples(operations);
    for (std::int32_t rep = -b_.warmup; rep < b_.repetitions; ++rep) {
      report("timing this rank's compute operations, repetition " +
             std::to_string(rep + b_.warmup + 1));
      for (std::size_t j = 0; j < slots; ++j) {
        world_->barrier();
        if (j >= ops.size()) continue;
        const ir::Compute one{.operations = {*ops[j]}};
        const Clock::time_point start = Clock::now();
        torch->run(one);
        if (rep >= 0) samples[j].push_back(seconds_since(start) / std::max(1, ops[j]->count));
      }
    }
    std::vector<double> flat;
    for (const std::vector<double>& s : samples) flat.insert(flat.end(), s.begin(), s.end());
    if (!tasks.empty()) world_->store_set(compute_key(rank_), encode(flat));
  }

  void time_collective(std::size_t i) {
    const CollectiveProbe& p = b_.collectives[i];
    const bool member = is_member(p);
    std::vector<double> mine;
    for (std::int32_t rep = -b_.warmup; rep < b_.repetitions; ++rep) {
      world_->barrier();
      if (!member) continue;
      const Clock::time_point start = Clock::now();
      call(p);
      if (rep >= 0) mine.push_back(seconds_since(start));
    }
    if (member) world_->store_set(collective_key(i, rank_), encode(mine));
  }

  void time_transfer(std::size_t i) {
    const TransferProbe& p = b_.transfers[i];
    std::vector<double> mine;
    for (std::int32_t rep = -b_.warmup; rep < b_.repetitions; ++rep) {
      world_->barrier();
      const std::int32_t tag = tag_++;
      if (rank_ == p.sender) world_->send(p.receiver, p.bytes, tag);
      if (rank_ != p.receiver) continue;
      const Clock::time_point start = Clock::now();
      world_->recv(p.sender, p.bytes, tag);
      if (rep >= 0) mine.push_back(seconds_since(start));
    }
    if (rank_ == p.receiver) world_->store_set(transfer_key(i), encode(mine));
  }

  /// The load's ranks; the first one times the compute.
  [[nodiscard]] std::vector<std::int32_t> load_ranks(const SlowdownProbe& s) const {
    if (const auto* c = std::get_if<CollectiveProbe>(&s.load)) return members(*c);
    const auto& t = std::get<TransferProbe>(s.load);
    return {t.sender, t.receiver};
  }

  /// One round of the load, this rank's part.
  void load_round(const SlowdownProbe& s, std::int64_t round) {
    if (const auto* c = std::get_if<CollectiveProbe>(&s.load)) {
      call(*c);
      return;
    }
    const auto& t = std::get<TransferProbe>(s.load);
    const auto tag = static_cast<std::int32_t>(kLoadTagBase + round % kLoadTagBase);
    if (rank_ == t.sender) world_->send(t.receiver, t.bytes, tag);
    if (rank_ == t.receiver) world_->recv(t.sender, t.bytes, tag);
  }

  /// The median over `repetitions` runs after the warm-up, and over as many more as fill
  /// SlowdownProbe::min_seconds: interference comes and goes with the load's phases.
  double median_compute(TorchCompute& compute, const SlowdownProbe& s) const {
    for (std::int32_t rep = 0; rep < b_.warmup; ++rep) compute.run(s.compute);
    std::vector<double> times;
    double total = 0;
    while (std::ssize(times) < b_.repetitions || total < s.min_seconds) {
      const Clock::time_point start = Clock::now();
      compute.run(s.compute);
      times.push_back(seconds_since(start));
      total += times.back();
    }
    return median_seconds(std::move(times));
  }

  /// Note [communication benchmark], the slow-downs: three phases, each after a barrier, on
  /// every rank of the load at once (the run overlaps them on every member alike).
  void time_slowdown(const SlowdownProbe& s) {
    const std::vector<std::int32_t> ranks = load_ranks(s);
    const bool loaded = std::ranges::find(ranks, rank_) != ranks.end();
    const bool front = rank_ == ranks.front();
    std::optional<TorchCompute> compute;
    if (loaded) {
      compute.emplace(TorchCompute::Options{.intra_op_threads = b_.intra_op_threads});
      compute->prepare(s.compute);
    }
    world_->barrier();
    report("the slow-downs: compute alone");
    const double compute_alone = loaded ? median_compute(*compute, s) : 0;
    world_->barrier();
    report("the slow-downs: communication alone");
    std::vector<double> comm_alone;
    for (std::int32_t rep = -b_.warmup; loaded && rep < b_.repetitions; ++rep) {
      const Clock::time_point start = Clock::now();
      load_round(s, load_rounds_++);
      if (rep >= 0) comm_alone.push_back(seconds_since(start));
    }
    world_->barrier();
    report("the slow-downs: compute and communication at once");
    Overlap both;
    if (loaded) both = overlap(s, *compute, front);
    if (front) {
      world_->store_set("metron/benchmark/slowdown",
                        encode({compute_alone, both.compute, static_cast<double>(both.rounds),
                                median_seconds(comm_alone), both.comm}));
    }
  }

  struct Overlap {
    double compute = 0;       ///< median compute time while the load ran
    double comm = 0;          ///< median time of the load's rounds completed meanwhile
    std::int64_t rounds = 0;  ///< those rounds
  };

  /// Compute on this thread while a second one runs the load back to back. The front rank times
  /// the compute (SlowdownProbe::min_seconds) and then says "stop" through the store before the
  /// next round; the other ranks compute until their load thread has read it.
  Overlap overlap(const SlowdownProbe& s, TorchCompute& compute, bool front) {
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
    std::atomic<std::int64_t> rounds{0};
    std::vector<double> round_seconds;  // written by the load thread, read after join
    std::exception_ptr failure;
    std::thread load([&] {
      try {
        for (std::int64_t round = 0;; ++round) {
          const std::string key = load_key(overlaps_ * 1'000'000'000LL + round);
          bool last = false;
          if (front) {
            last = stop.load();
            world_->store_set(key, last ? "stop" : "go");
          } else {
            last = world_->store_get(key) != "go";
          }
          if (last) break;
          const Clock::time_point start = Clock::now();
          load_round(s, load_rounds_++);
          round_seconds.push_back(seconds_since(start));
          rounds.store(round + 1);
        }
      } catch (...) {
        failure = std::current_exception();
        rounds.store(-1);
      }
      finished.store(true);
    });
    Overlap out;
    std::int64_t before = 0;
    try {
      if (front) {
        // Time only once the load flows on every rank: its first round has completed.
        while (rounds.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        before = rounds.load();
        if (before > 0) out.compute = median_compute(compute, s);
        out.rounds = std::max<std::int64_t>(0, rounds.load() - before);
        stop.store(true);
      } else {
        while (!finished.load()) compute.run(s.compute);
      }
    } catch (...) {
      stop.store(true);
      load.join();
      throw;
    }
    load.join();
    ++overlaps_;
    if (failure) std::rethrow_exception(failure);
    // The rounds that ran while the compute was timed; the last one when a round outlasted it.
    const auto first = static_cast<std::size_t>(std::max<std::int64_t>(0, before));
    std::vector<double> meanwhile(
        round_seconds.begin() + static_cast<std::ptrdiff_t>(std::min(first, round_seconds.size())),
        round_seconds.end());
    if (meanwhile.empty() && !round_seconds.empty()) meanwhile.push_back(round_seconds.back());
    out.comm = median_seconds(std::move(meanwhile));
    return out;
  }

  CommMeasurement gather() {
    CommMeasurement m;
    for (std::size_t r = 0; r < b_.compute.size(); ++r) {
      auto& by_task = m.compute_seconds.emplace_back();
      if (b_.compute[r].empty()) continue;
      const std::vector<double> flat =
          decode(world_->store_get(compute_key(static_cast<std::int32_t>(r))));
      std::size_t at = 0;
      const auto reps = static_cast<std::size_t>(b_.repetitions);
      for (const ir::Compute& task : b_.compute[r]) {
        auto& by_op = by_task.emplace_back();
        for (std::size_t o = 0; o < task.operations.size(); ++o) {
          METRON_ASSERT(at + reps <= flat.size(), "every operation's repetitions");
          by_op.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                             flat.begin() + static_cast<std::ptrdiff_t>(at + reps));
          at += reps;
        }
      }
    }
    for (std::size_t i = 0; i < b_.collectives.size(); ++i) {
      std::vector<std::vector<double>> per_member;
      for (const std::int32_t member : members(b_.collectives[i])) {
        per_member.push_back(decode(world_->store_get(collective_key(i, member))));
      }
      m.collective_seconds.push_back(median_of_slowest(per_member));
    }
    for (std::size_t i = 0; i < b_.transfers.size(); ++i) {
      m.transfer_seconds.push_back(median_seconds(decode(world_->store_get(transfer_key(i)))));
    }
    if (b_.slowdown) {
      const std::vector<double> v = decode(world_->store_get("metron/benchmark/slowdown"));
      METRON_ASSERT(v.size() == 5, "the slow-downs' four medians and the load's rounds");
      const auto ratio = [](double with, double alone) {
        return alone > 0 ? std::max(0.0, with / alone - 1) : 0.0;
      };
      m.slowdown = SlowdownMeasurement{.alone_seconds = v[0],
                                       .with_comm_seconds = v[1],
                                       .slowdown = ratio(v[1], v[0]),
                                       .load_rounds = std::llround(v[2]),
                                       .comm_alone_seconds = v[3],
                                       .comm_with_compute_seconds = v[4],
                                       .comm_slowdown = ratio(v[4], v[3])};
    }
    return m;
  }

  const CommBenchmark& b_;
  std::int32_t rank_;
  const BenchmarkStatus& status_;
  std::unique_ptr<GlooWorld> world_;
  std::vector<std::int64_t> ordinals_;  // the next ordinal of each group (GlooWorld's turns)
  std::int32_t tag_ = 0;
  std::int64_t load_rounds_ = 0;  // rounds of a slow-down load so far (their transfers' tags)
  std::int64_t overlaps_ = 0;     // overlap phases so far (their store keys)
};

}  // namespace

double median_of_slowest(const std::vector<std::vector<double>>& per_member) {
  std::vector<double> slowest;
  for (const std::vector<double>& times : per_member) {
    if (slowest.size() < times.size()) slowest.resize(times.size(), 0.0);
    for (std::size_t r = 0; r < times.size(); ++r) slowest[r] = std::max(slowest[r], times[r]);
  }
  return median_seconds(std::move(slowest));
}

std::optional<CommMeasurement> measure_communication(const CommBenchmark& benchmark,
                                                     const Rendezvous& rendezvous,
                                                     const BenchmarkStatus& status) {
  check(benchmark, rendezvous.world_size);
  BenchmarkRank rank(benchmark, rendezvous, status);
  try {
    return rank.run();
  } catch (...) {
    // The world is left alive, never destroyed: a thread may be blocked in a Gloo call that only
    // a peer can end, and destroying it would wait for that (as run_cpu_rank does). The process
    // ends right after the error anyway.
    rank.abandon();
    throw;
  }
}

}  // namespace metron::exec
