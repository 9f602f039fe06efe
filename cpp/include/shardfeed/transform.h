// Push-down transforms, run by the engine's workers on each decoded row group
// (before stacking), declared as plain data.
//
// Random transforms draw from CounterRng(seed, epoch, Purpose::kTransformBase
// + position, sample id): the value a sample gets depends only on the data,
// the seed, the epoch, the transform's position in the list and the sample's
// natural-order id -- not on threads, processes, ranks or a resume.
//
// A transform's `column` may name a stack instead of a column: it then runs on
// the stack's [rows, F] matrix, after the member columns' own transforms, with
// per-feature settings (`a_values` / `b_values`, length F) or one setting for
// every feature, and a random one draws all of a sample's F values from the
// sample's one stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/result.h>

#include "shardfeed/batch.h"
#include "shardfeed/vocabulary.h"

namespace shardfeed {

enum class TransformOp {
  kCast,           // dtype
  kFillNull,       // a = value
  kClip,           // a = min, b = max (+-inf when absent)
  kStandardize,    // a = mean, b = std > 0       -> float
  kLog1p,          //                             -> float
  kHashBucket,     // n = buckets > 0; ints or strings -> int64
  kBucketize,      // boundaries strictly increasing -> int64
  kGaussianNoise,  // a = std >= 0 (random)       -> float
  kRandomMask,     // a = probability in [0, 1], b = value (random)
  kRandomCrop,     // n = length >= 1, variable-length lists (random)
  kVocabulary,     // vocabulary = the values, n = oov index; strings -> int64
};

struct TransformSpec {
  TransformOp op = TransformOp::kCast;
  std::string column;
  double a = 0;
  double b = 0;
  int64_t n = 0;
  std::vector<double> boundaries;
  // Stacks only: per-feature a and b (length F); empty = `a` / `b` for every feature.
  std::vector<double> a_values;
  std::vector<double> b_values;
  DType dtype = DType::kFloat32;
  // Vocabulary: the table, built once (a loader shares it between its engines).
  std::shared_ptr<const VocabularyTable> vocabulary;
};

// Parses an op name ("Cast", "Standardize", ...), as the Python layer spells it.
arrow::Result<TransformOp> ParseTransformOp(const std::string& name);
const char* TransformOpName(TransformOp op);
bool IsRandom(TransformOp op);

}  // namespace shardfeed
