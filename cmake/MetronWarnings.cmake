# metron::warnings: an INTERFACE target every metron target links PRIVATE, so our warning flags
# never leak into consumers (docs/STYLE.md, "Set no global flags").
add_library(metron_warnings INTERFACE)
add_library(metron::warnings ALIAS metron_warnings)
target_compile_options(metron_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual -Wimplicit-fallthrough
    # Designated initializers that leave members at their defaults (`Task{.rank = r, .op = ...}`,
    # docs/STYLE.md E1) are the intended style, not a mistake.
    -Wno-missing-field-initializers>
  # -Wnull-dereference only where it is precise: GCC 12 reports "potential null pointer
  # dereference" inside libstdc++'s streambuf for any std::istreambuf_iterator read at -O2/-O3.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wnull-dereference>
  # GCC 12 at -O3 (Release) warns on std::string copies inside libstdc++ (GCC bug 105329,
  # "-Wrestrict false positive"); fixed in GCC 13.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${METRON_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${METRON_WERROR}>>:-Werror=all-warnings>)
# Exported (static libraries name it as $<LINK_ONLY:...>), but LINK_ONLY carries no flags along.
set_target_properties(metron_warnings PROPERTIES EXPORT_NAME warnings)
