// The nanobind module shardfeed._core: thin handles over the C++ core, one
// register_<area>.cc per area.  Every method that blocks or reads files
// releases the GIL; errors cross as StatusError and become shardfeed._errors
// classes (see convert.cc).  The bindings see only the public headers
// (cpp/include/shardfeed), never the core's private ones.
#include <nanobind/nanobind.h>

#include "convert.h"
#include "register.h"

NB_MODULE(_core, m) {
  using namespace shardfeed::py;
  RegisterErrorTranslator();
  // The order is the order of the definitions in the stub (_core.pyi).
  RegisterPlan(m);
  RegisterTransforms(m);
  RegisterDataset(m);
  RegisterCache(m);
  RegisterEngine(m);
}
