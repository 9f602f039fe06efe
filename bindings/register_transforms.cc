// Push-down transforms, and the per-sample random numbers that Python-side
// transforms draw from the same generator.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>

#include "convert.h"
#include "gil.h"
#include "register.h"
#include "shardfeed/batch.h"
#include "shardfeed/rng.h"
#include "shardfeed/status.h"
#include "shardfeed/transform.h"
#include "shardfeed/vocabulary.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace shardfeed::py {

void RegisterTransforms(nb::module_& m) {
  nb::class_<TransformSpec>(m, "TransformSpec")
      .def(nb::init<>())
      .def_prop_rw(
          "op", [](const TransformSpec& t) { return std::string(TransformOpName(t.op)); },
          [](TransformSpec& t, const std::string& name) { t.op = Unwrap(ParseTransformOp(name)); })
      .def_rw("column", &TransformSpec::column)
      .def_rw("a", &TransformSpec::a)
      .def_rw("b", &TransformSpec::b)
      .def_rw("n", &TransformSpec::n)
      .def_rw("boundaries", &TransformSpec::boundaries)
      .def_rw("a_values", &TransformSpec::a_values,
              "Stacks: per-feature values of a (empty: a for every feature).")
      .def_rw("b_values", &TransformSpec::b_values,
              "Stacks: per-feature values of b (empty: b for every feature).")
      .def_prop_rw(
          "values",
          [](const TransformSpec& t) {
            std::vector<nb::bytes> out;
            if (t.vocabulary) {
              for (const auto& v : t.vocabulary->values()) out.emplace_back(v.data(), v.size());
            }
            return out;
          },
          [](TransformSpec& t, const std::vector<nb::bytes>& values) {
            std::vector<std::string> owned;
            owned.reserve(values.size());
            for (const auto& v : values) owned.emplace_back(v.c_str(), v.size());
            ReleaseGil release;
            t.vocabulary = Unwrap(VocabularyTable::Make(std::move(owned)));
          },
          "Vocabulary: the values as bytes (str values as their UTF-8); setting it builds "
          "the lookup table once.")
      .def_prop_rw(
          "dtype", [](const TransformSpec& t) { return std::string(DTypeName(t.dtype)); },
          [](TransformSpec& t, const std::string& name) {
            if (!ParseDType(name, &t.dtype)) {
              throw StatusError(Error(ErrorKind::kInvalidArgument, "unknown dtype '" + name + "'"));
            }
          });

  m.def(
      "sample_uniform",
      [](nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> sample_ids,
         uint64_t seed, uint64_t epoch, uint64_t stream, int64_t size) {
        // Per-sample uniforms in [0, 1) from the same counter-based generator as
        // the built-in transforms, keyed by (seed, epoch, stream, sample id); one
        // call per batch, no Python per sample.
        const auto n = static_cast<int64_t>(sample_ids.shape(0));
        auto out = Unwrap(OutputBuffer::Make(static_cast<size_t>(n * size) * sizeof(double)));
        {
          ReleaseGil release;
          const uint64_t purpose = static_cast<uint64_t>(Purpose::kUserBase) + stream;
          auto* dst = out->As<double>();
          for (int64_t i = 0; i < n; ++i) {
            CounterRng rng(seed, epoch, purpose, static_cast<uint64_t>(sample_ids(i)));
            for (int64_t j = 0; j < size; ++j) dst[i * size + j] = rng.Uniform();
          }
        }
        Batch batch;
        batch.arrays.push_back({"u", DType::kFloat64, {n, size}, out});
        return nb::object(BatchToDict(batch)["u"]);
      },
      "sample_ids"_a, "seed"_a, "epoch"_a, "stream"_a, "size"_a,
      nb::sig("def sample_uniform(sample_ids: numpy.typing.NDArray[numpy.int64], seed: int, "
              "epoch: int, stream: int, size: int) -> numpy.typing.NDArray[numpy.float64]"));
}

}  // namespace shardfeed::py
