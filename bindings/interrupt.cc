#include "interrupt.h"

#include <Python.h>

namespace shardfeed::py {

void CheckSignals() {
  if (PyErr_CheckSignals() != 0) throw nanobind::python_error();
}

}  // namespace shardfeed::py
