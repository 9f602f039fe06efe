// The engine: its options, the handle that yields batches, and the count of
// live batch buffers (for tests).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "convert.h"
#include "gil.h"
#include "interrupt.h"
#include "register.h"
#include "shardfeed/batch.h"
#include "shardfeed/cache.h"
#include "shardfeed/decoded_tier.h"
#include "shardfeed/engine.h"
#include "shardfeed/output_arena.h"
#include "shardfeed/status.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {
namespace {

// Engines whose making has begun and not ended: the next pass's, made on a
// thread of its own, may still be making (planning, writing its first pages)
// when the interpreter exits.  The exit hook waits for them: one made after it
// is stopped before its thread parks, but one still being made when the
// process went on to its C++ exit handlers decoded on under them (a segfault).
std::atomic<int> engines_being_made{0};

// Counts one making while it lives (a making whose thread parks at exit ends
// in its OnPark, as that thread never comes back to this scope).
struct Making {
  Making() { engines_being_made.fetch_add(1); }
  ~Making() { engines_being_made.fetch_sub(1); }
  Making(const Making&) = delete;
  Making& operator=(const Making&) = delete;
};

// A fork copies an engine but not its threads, which stay in the process that
// made it: there, stopping the engine joins them; in the child it would join
// threads that do not exist (std::system_error) or wait on locks they held.  So
// in another process than its own an engine is never stopped nor destroyed (its
// memory is a copy, left as it is), and next() says why it cannot deliver.
class EngineHandle {
 public:
  EngineHandle(std::unique_ptr<Engine> engine, int64_t num_batches)
      : engine_(std::move(engine)), num_batches_(num_batches), pid_(getpid()) {}
  ~EngineHandle() {
    if (Forked()) {
      (void)engine_.release();
      return;
    }
    ReleaseGil release;
    engine_.reset();  // stops and joins the workers
  }

  // Waits in slices of kSignalPoll and looks for signals between them, so that
  // Ctrl-C raises KeyboardInterrupt within a fraction of a second whatever the
  // workers are stuck on.  The interrupted wait loses nothing: the engine keeps
  // its position and a later next() delivers the batch it was waiting for.
  nb::object Next() {
    if (Forked()) {
      Check(Error(ErrorKind::kInvalidArgument,
                  "this engine was made in process " + std::to_string(pid_) +
                      " and copied into this one by a fork, without its threads: make the "
                      "loader in the process that iterates it (or iterate it anew: a Loader "
                      "starts a fresh engine after a fork)"));
    }
    std::shared_ptr<Batch> batch;
    for (;;) {
      bool timed_out = false;
      {
        ReleaseGil release;
        batch = Unwrap(engine_->NextWithin(kSignalPoll, &timed_out));
      }
      if (!timed_out) break;
      CheckSignals();
    }
    if (!batch) return nb::none();
    return BatchToDict(*batch);
  }

  void Cancel() {
    if (!Forked()) engine_->Cancel();
  }

  void Close() {
    if (Forked()) return;
    ReleaseGil release;
    engine_->Stop();
  }

  int64_t num_units() const { return engine_->num_units(); }
  int64_t memory_held() const { return engine_->memory_held(); }
  bool decodes_started() const { return engine_->decodes_started(); }

  std::vector<std::tuple<int, std::string, double, double, int64_t>> Trace() const {
    std::vector<std::tuple<int, std::string, double, double, int64_t>> out;
    for (const auto& e : engine_->trace()) {
      out.emplace_back(e.worker, e.stage, e.start_us, e.duration_us, e.arg);
    }
    return out;
  }
  int64_t num_batches() const { return num_batches_; }

  nb::dict Stats() const {
    const EngineStats s = engine_->stats();
    nb::dict d;
    d["row_groups_decoded"] = s.row_groups_decoded;
    d["rows_decoded"] = s.rows_decoded;
    d["bytes_decoded"] = s.bytes_decoded;
    d["stack_columns_tiled"] = s.stack_columns_tiled;
    d["stack_columns_generic"] = s.stack_columns_generic;
    d["decode_parts_shared"] = s.decode_parts_shared;
    d["batches"] = s.batches;
    d["rows_delivered"] = s.rows_delivered;
    d["threads"] = s.threads;
    d["elapsed_seconds"] = s.elapsed_seconds;
    nb::dict stages;
    for (const auto& st : s.stages) {
      nb::dict one;
      one["seconds"] = st.seconds;
      one["bytes"] = st.bytes;
      one["rows"] = st.rows;
      stages[st.name.c_str()] = one;
    }
    d["stages"] = stages;
    d["worker_wait_seconds"] = s.worker_wait_seconds;
    d["consumer_wait_seconds"] = s.consumer_wait_seconds;
    d["decoded_row_groups"] = s.decoded_row_groups;
    d["peak_live_row_groups"] = s.peak_live_row_groups;
    nb::dict memory;
    memory["limit_bytes"] = s.memory_limit;
    memory["peak_bytes"] = s.memory_peak;
    memory["used_bytes"] = s.memory_used;
    memory["peak_decoding_bytes"] = s.memory_peak_decoding;
    memory["peak_decoded_bytes"] = s.memory_peak_decoded;
    memory["peak_batch_bytes"] = s.memory_peak_batches;
    memory["peak_idle_bytes"] = s.memory_peak_idle;
    memory["peak_together_bytes"] = s.memory_peak_together;
    memory["matrices_reused"] = s.matrices_reused;
    memory["matrices_allocated"] = s.matrices_allocated;
    memory["matrices_prefaulted"] = s.matrices_prefaulted;
    memory["batch_buffers_reused"] = s.batch_buffers_reused;
    memory["batch_buffers_allocated"] = s.batch_buffers_allocated;
    memory["batch_buffers_prefaulted"] = s.batch_buffers_prefaulted;
    memory["waits"] = s.memory_waits;
    memory["wait_seconds"] = s.memory_wait_seconds;
    memory["over_limit"] = s.memory_over_limit;
    memory["ready_batches"] = s.ready_batches_capacity;
    d["memory"] = memory;
    return d;
  }

 private:
  bool Forked() const { return getpid() != pid_; }

  std::unique_ptr<Engine> engine_;
  int64_t num_batches_;
  pid_t pid_;
};

// Keeps a Python object alive for C++: the last release takes the GIL (from
// whichever thread drops it), or leaks it once the interpreter is gone or
// exiting (see gil.h).
std::shared_ptr<void> HoldPython(nb::object owner) {
  return std::shared_ptr<void>(new nb::object(std::move(owner)), [](void* p) {
    auto* held = static_cast<nb::object*>(p);
    WithGilUnlessExiting([held] { delete held; });
  });
}

void RegisterArena(nb::module_& m) {
  nb::class_<SlabArena>(m, "OutputArena",
                        "Slabs of memory that batch buffers come from (pin_memory=True).")
      .def(nb::init<>())
      .def(
          "add_slab",
          [](SlabArena& a, uintptr_t address, size_t size, nb::object owner) {
            a.AddSlab(reinterpret_cast<uint8_t*>(address), size, HoldPython(std::move(owner)));
          },
          "address"_a, "size"_a, "owner"_a,
          "Adds [address, address + size), which `owner` keeps alive (until the arena and "
          "every buffer from it are gone).")
      .def(
          "contains",
          [](const SlabArena& a, uintptr_t address) {
            return a.Contains(reinterpret_cast<const uint8_t*>(address));
          },
          "address"_a)
      .def("stats", [](const SlabArena& a) {
        const SlabArenaStats s = a.stats();
        return std::map<std::string, int64_t>{
            {"slabs", s.slabs},
            {"bytes", s.bytes},
            {"used_bytes", s.used_bytes},
            {"peak_bytes", s.peak_bytes},
            {"allocations", s.allocations},
            {"misses", s.misses},
            {"missed_bytes", s.missed_bytes},
        };
      });
}

}  // namespace

void RegisterEngine(nb::module_& m) {
  RegisterArena(m);
  nb::class_<EngineLeftovers>(m, "EngineLeftovers",
                              "Idle matrices and batch buffers one engine leaves to the next.")
      .def(nb::init<>())
      .def_prop_ro("bytes", &EngineLeftovers::bytes, "Bytes held now (between engines).")
      .def("clear", &EngineLeftovers::Clear, "Frees what it holds.");
  nb::class_<EngineOptions>(m, "EngineOptions")
      .def(nb::init<>())
      .def_rw("output", &EngineOptions::output)
      .def_rw("num_threads", &EngineOptions::num_threads)
      .def_rw("queue_depth", &EngineOptions::queue_depth)
      .def_rw("start_batch", &EngineOptions::start_batch)
      .def_rw("batch_offset", &EngineOptions::batch_offset)
      .def_rw("batch_stride", &EngineOptions::batch_stride)
      .def_rw("decoded_tier", &EngineOptions::decoded_tier)
      .def_rw("file_cache", &EngineOptions::file_cache)
      .def_rw("prefetch_bytes", &EngineOptions::prefetch_bytes)
      .def_rw("memory_limit", &EngineOptions::memory_limit)
      .def_rw("trace", &EngineOptions::trace)
      .def_rw("debug_max_delay_us", &EngineOptions::debug_max_delay_us)
      .def_rw("debug_slow_stage", &EngineOptions::debug_slow_stage)
      .def_rw("debug_slow_us", &EngineOptions::debug_slow_us)
      .def_rw("remote_timeout", &EngineOptions::remote_timeout)
      .def_rw("verify_page_checksums", &EngineOptions::verify_page_checksums)
      .def_prop_rw(
          "output_arena",
          [](const EngineOptions& o) {
            return std::dynamic_pointer_cast<SlabArena>(o.output_arena);
          },
          [](EngineOptions& o, std::shared_ptr<SlabArena> arena) {
            o.output_arena = std::move(arena);
          },
          nb::arg("arena").none())
      .def_rw("leftovers", &EngineOptions::leftovers, nb::arg("leftovers").none())
      .def(
          "validate", [](const EngineOptions& o) { Check(o.Validate()); },
          "Raises InvalidArgumentError for a setting out of range.");

  nb::class_<EngineHandle>(m, "Engine", nb::is_weak_referenceable())
      .def(
          "__init__",
          [](EngineHandle* self, const DatasetHandle& d, const PlanOptions& plan_options,
             const EngineOptions& options) {
            std::unique_ptr<Engine> engine;
            int64_t num_batches = 0;
            {
              const Making making;
              ReleaseGil release;
              // Made while the interpreter exits (the next pass's engine, on a
              // thread of its own): the exit hook did not close it.  Its making
              // ends here, as this thread parks (also after an error).
              release.OnPark([&engine] {
                if (engine) engine->Stop();
                engines_being_made.fetch_sub(1);
              });
              auto plan = MakePlan(d, plan_options);
              num_batches = plan->num_batches();
              EngineOptions with_filter = options;
              with_filter.filter = d.filter;
              engine = Unwrap(Engine::Make(d.catalog, plan, with_filter));
            }
            new (self) EngineHandle(std::move(engine), num_batches);
          },
          "dataset"_a, "plan"_a, "options"_a)
      .def("next", &EngineHandle::Next,
           nb::sig("def next(self) -> dict[str, numpy.typing.NDArray[typing.Any]] | None"),
           "The next batch as {name: array}, None after the last; raises the first error.")
      .def("close", &EngineHandle::Close)
      .def("cancel", &EngineHandle::Cancel,
           "Stops the workers without waiting for them (after Ctrl-C); close() joins them.")
      .def_prop_ro("num_units", &EngineHandle::num_units)
      .def_prop_ro("num_batches", &EngineHandle::num_batches)
      .def_prop_ro("memory_held", &EngineHandle::memory_held,
                   "Bytes held now: booked in the memory budget and idle (kept for reuse).")
      .def_prop_ro(
          "decodes_started", &EngineHandle::decodes_started,
          "Every row group of the last window its units read has begun to decode (it books "
          "no more memory from now on).")
      .def("trace", &EngineHandle::Trace,
           "Timeline events (worker, stage, start_us, duration_us, arg); needs options.trace.")
      .def("stats", &EngineHandle::Stats, nb::sig("def stats(self) -> dict[str, typing.Any]"));

  m.def(
      "plan_memory",
      [](const DatasetHandle& d, const PlanOptions& plan, const EngineOptions& options) {
        const std::vector<int64_t> rows =
            d.filter ? d.filter->pass_rows() : d.catalog->RowGroupRows();
        const MemoryPlan p = Unwrap(PlanMemory(d.catalog, rows, plan, options));
        nb::dict out;
        out["window_row_groups"] = p.window_row_groups;
        out["row_group_bytes"] = p.row_group_bytes;
        out["max_row_group_bytes"] = p.max_row_group_bytes;
        out["batch_bytes"] = p.batch_bytes;
        out["ready_batches"] = p.ready_batches;
        out["expected_peak_bytes"] = p.expected_peak_bytes;
        out["floor_bytes"] = p.floor_bytes;
        out["start_bytes"] = p.start_bytes;
        out["expected_mixing"] = p.expected_mixing;
        out["limit_for_window_16"] = p.limit_for_target_window;
        return out;
      },
      "dataset"_a, "plan"_a, "options"_a,
      nb::sig("def plan_memory(dataset: Dataset, plan: PlanOptions, options: EngineOptions) -> "
              "dict[str, typing.Any]"),
      "The shuffle window (plan.window_row_groups == 0: chosen from options.memory_limit), the "
      "expected peak of stats()['memory'] and the expected mixing W_eff, from the footers.");
  m.def(
      "wait_for_abandoned_calls",
      [](double seconds) {
        ReleaseGil release;
        return WaitForAbandonedRemoteCalls(seconds);
      },
      "seconds"_a,
      "From the exit hook: waits until no remote call given up at its deadline still runs "
      "(or `seconds` pass), so that pyarrow's S3 shutdown does not tear the AWS SDK down "
      "under one; whether none runs.");
  m.def(
      "wait_for_engines_being_made",
      [](double seconds) {
        ReleaseGil release;
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(seconds));
        while (engines_being_made.load() > 0 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return engines_being_made.load() == 0;
      },
      "seconds"_a,
      "From the exit hook, after begin_exit: waits until no engine is being made on another "
      "thread (each one made from now on is stopped as its thread parks), or `seconds` pass; "
      "whether none is.");
  m.def("live_buffers", &OutputBuffer::live_count,
        "Batch buffers allocated by the engine and not yet freed (for tests).");
  m.def("live_engine_threads", &LiveEngineThreads,
        "Engine worker and prefetcher threads that have not returned yet (for tests).");
  m.def(
      "begin_exit",
      [](bool quiet_leaks) {
        BeginExit();
        // Objects that other threads' frames hold at exit are never freed: not
        // a reference-count bug, so no leak report for them.
        if (quiet_leaks) nb::set_leak_warnings(false);
      },
      "quiet_leaks"_a,
      "From the exit hook: other threads no longer take the GIL back in this module (they "
      "sleep until the process ends); quiet_leaks: no leak report (other threads hold objects).");
}

}  // namespace shardfeed::py
