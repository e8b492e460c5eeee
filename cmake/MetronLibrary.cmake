# metron_add_library(<name> [SOURCES <files...>] [PUBLIC <targets...>] [PRIVATE <targets...>])
#
# The shape every metron module shares (docs/STYLE.md E9), written once: target metron_<name>, alias
# metron::<name>, export name <name>, public headers in the module's include/, C++20, and
# metron::warnings linked PRIVATE. Without SOURCES it is an INTERFACE library: a module whose
# issue has not come yet, which already fixes its place in the dependency graph.
function(metron_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  set(target metron_${name})
  if(ARG_SOURCES)
    add_library(${target} ${ARG_SOURCES})
    set(scope PUBLIC)
    target_link_libraries(${target} PRIVATE metron::warnings ${ARG_PRIVATE})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(metron::${name} ALIAS ${target})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${target} ${scope}
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endif()
  target_compile_features(${target} ${scope} cxx_std_20)
  if(ARG_PUBLIC)
    target_link_libraries(${target} ${scope} ${ARG_PUBLIC})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endfunction()
