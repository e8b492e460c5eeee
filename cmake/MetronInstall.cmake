# Install and export rules (fmt's and nlohmann/json's pattern): every library target goes into
# the export set `metronTargets`, installed with a package config + version file, so consumers
# write `find_package(metron)` and link `metron::ir`. The same set is also exported from the
# build tree, so a consumer can point metron_DIR at a build folder without installing.
# Included from the top-level CMakeLists.txt when METRON_INSTALL is on.
include(CMakePackageConfigHelpers)

set(METRON_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/metron"
  CACHE STRING "Where metron's CMake package files are installed, relative to the prefix")
mark_as_advanced(METRON_INSTALL_CMAKEDIR)

# Every library target, in dependency order. metron_warnings is in the set because static
# libraries carry it as $<LINK_ONLY:metron::warnings>; being INTERFACE-only and LINK_ONLY, it
# passes no flags to consumers. Add a module's target here when its issue creates it.
set(_metron_install_targets
  metron_warnings
  metron_base
  metron_ir
  metron_traces
  metron_timelines
  metron_chakra
  metron_models
  metron_pipeline
  metron_lowering
  metron_sync
  metron_sim
  metron_exec
  metron_scenario
  metron_plan
  metron_validation)
# Module folders whose include/ holds public headers (installed when the folder exists).
set(_metron_header_dirs base schedules/ir schedules/pipeline schedules/lowering schedules/sync traces
  timelines chakra models sim exec scenario plan validation)
if(TARGET metron_exec_cuda)
  list(APPEND _metron_install_targets metron_exec_cuda)
  list(APPEND _metron_header_dirs exec/cuda)
endif()
if(TARGET metron)
  list(APPEND _metron_install_targets metron)
endif()

install(TARGETS ${_metron_install_targets}
  EXPORT metronTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# metron finds metron-exec here (Note [two programs] in cli/cli_main.h); not part of the export.
if(TARGET metron_executor)
  install(TARGETS metron_executor RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/metron)
endif()

foreach(_dir IN LISTS _metron_header_dirs)
  if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/${_dir}/include/metron")
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_dir}/include/"
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h")
  endif()
endforeach()

install(EXPORT metronTargets
  NAMESPACE metron::
  FILE metronTargets.cmake
  DESTINATION ${METRON_INSTALL_CMAKEDIR})

# metronConfig.cmake needs to know whether the CUDA part is in the export set, because
# metron_exec_cuda (static) links CUDA::cudart and NCCL::NCCL, which consumers must find too.
set(METRON_PACKAGE_HAS_CUDA ${METRON_HAVE_CUDA})

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/metronConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/package/metronConfig.cmake"
  INSTALL_DESTINATION ${METRON_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/metronConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)

set(_metron_package_files
  "${PROJECT_BINARY_DIR}/package/metronConfig.cmake"
  "${PROJECT_BINARY_DIR}/metronConfigVersion.cmake")
if(METRON_PACKAGE_HAS_CUDA)
  list(APPEND _metron_package_files "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake")
endif()
install(FILES ${_metron_package_files} DESTINATION ${METRON_INSTALL_CMAKEDIR})

# Build tree: metron_DIR=<build folder> works without installing.
export(EXPORT metronTargets
  NAMESPACE metron::
  FILE "${PROJECT_BINARY_DIR}/metronTargets.cmake")
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/metronConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/metronConfig.cmake"
  INSTALL_DESTINATION "${PROJECT_BINARY_DIR}"
  INSTALL_PREFIX "${PROJECT_BINARY_DIR}")
if(METRON_PACKAGE_HAS_CUDA)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
    "${PROJECT_BINARY_DIR}/FindNCCL.cmake" COPYONLY)
endif()

unset(_metron_install_targets)
unset(_metron_header_dirs)
unset(_metron_package_files)
