# Imported targets for Arrow and Parquet C++ from the pyarrow wheel.
#
# The wheel ships headers and versioned shared libraries (libarrow.so.NNNN,
# libparquet.so.NNNN) but no CMake package, so we ask the interpreter where
# they are and name the versioned files directly.  The major version is pinned
# in pyproject.toml; the extension is linked against exactly that SONAME.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import pyarrow as pa; print(pa.get_include()); print(pa.get_library_dirs()[0]); print(pa.__version__)"
  OUTPUT_VARIABLE _pa_out
  RESULT_VARIABLE _pa_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _pa_rc EQUAL 0)
  message(FATAL_ERROR "shardfeed needs pyarrow installed in ${Python_EXECUTABLE} to build")
endif()
string(REPLACE "\n" ";" _pa_lines "${_pa_out}")
list(GET _pa_lines 0 PYARROW_INCLUDE_DIR)
list(GET _pa_lines 1 PYARROW_LIB_DIR)
list(GET _pa_lines 2 PYARROW_VERSION)
string(REGEX MATCH "^[0-9]+" PYARROW_MAJOR "${PYARROW_VERSION}")
set(_so_version "${PYARROW_MAJOR}00")
message(STATUS "Arrow C++ from pyarrow ${PYARROW_VERSION}: ${PYARROW_LIB_DIR}")

# Arrow >= 21 ships its compute kernels (Cast) in libarrow_compute.
foreach(_lib arrow parquet arrow_compute)
  set(_path "${PYARROW_LIB_DIR}/lib${_lib}.so.${_so_version}")
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "not found: ${_path} (pyarrow ${PYARROW_VERSION})")
  endif()
  add_library(shardfeed_pa_${_lib} SHARED IMPORTED GLOBAL)
  set_target_properties(
    shardfeed_pa_${_lib}
    PROPERTIES IMPORTED_LOCATION "${_path}"
               IMPORTED_SONAME "lib${_lib}.so.${_so_version}"
               INTERFACE_INCLUDE_DIRECTORIES "${PYARROW_INCLUDE_DIR}"
               INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${PYARROW_INCLUDE_DIR}"
               INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
endforeach()
set_target_properties(shardfeed_pa_parquet PROPERTIES INTERFACE_LINK_LIBRARIES shardfeed_pa_arrow)
set_target_properties(shardfeed_pa_arrow_compute PROPERTIES INTERFACE_LINK_LIBRARIES
                                                            shardfeed_pa_arrow)
add_library(Arrow::arrow ALIAS shardfeed_pa_arrow)
add_library(Parquet::parquet ALIAS shardfeed_pa_parquet)
add_library(Arrow::compute ALIAS shardfeed_pa_arrow_compute)
