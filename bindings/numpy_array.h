// NumPy arrays over batch buffers, made through NumPy's C API.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "shardfeed/batch.h"

namespace shardfeed::py {

// A writable, C-contiguous array of `shape` over the buffer's memory; the
// array holds a reference to the buffer, dropped with the array's last view.
// Needs the GIL.  (nanobind's ndarray export goes through numpy.array() and
// the buffer protocol, parsing a format string: 7 us per array on a cold
// cache in the consumer's next(), against about 1 us here.)
nanobind::object WrapBuffer(const std::shared_ptr<OutputBuffer>& buffer,
                            const std::vector<int64_t>& shape, DType dtype);

}  // namespace shardfeed::py
