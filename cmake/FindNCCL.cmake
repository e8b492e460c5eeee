# FindNCCL: finds NVIDIA's collective communication library.
#
# Searches, in order: NCCL_ROOT (CMake variable), $ENV{NCCL_ROOT}, then the CUDA toolkit's own
# folders. The toolkit matters here: this machine's NCCL sits in the toolkit's `lib` folder, next
# to libcudart, not under /usr/lib. Call find_package(CUDAToolkit) first so those are known.
#
# Result variables:
#   NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION (MAJOR.MINOR.PATCH, from nccl.h)
#   NCCL_INCLUDE_DIRS, NCCL_LIBRARIES
# Imported target:
#   NCCL::NCCL

set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
set(_nccl_include_hints ${CUDAToolkit_INCLUDE_DIRS})
set(_nccl_library_hints ${CUDAToolkit_LIBRARY_DIR})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_library_hints "${CUDAToolkit_LIBRARY_ROOT}/lib" "${CUDAToolkit_LIBRARY_ROOT}/lib64")
  list(APPEND _nccl_include_hints "${CUDAToolkit_LIBRARY_ROOT}/include")
endif()

find_path(NCCL_INCLUDE_DIR
  NAMES nccl.h
  HINTS ${_nccl_hints}
  PATH_SUFFIXES include
  PATHS ${_nccl_include_hints})
find_library(NCCL_LIBRARY
  NAMES nccl
  HINTS ${_nccl_hints}
  PATH_SUFFIXES lib lib64
  PATHS ${_nccl_library_hints})

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
    REGEX "^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part}[ \t]+([0-9]+).*" "\\1" _nccl_${_part}
      "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND)
  set(NCCL_INCLUDE_DIRS "${NCCL_INCLUDE_DIR}")
  set(NCCL_LIBRARIES "${NCCL_LIBRARY}")
  if(NOT TARGET NCCL::NCCL)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()

mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(_nccl_hints)
unset(_nccl_include_hints)
unset(_nccl_library_hints)
unset(_nccl_version_lines)
