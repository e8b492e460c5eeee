# Note [two programs] (cli/cli_main.h): metron must start without libtorch, Gloo or the CUDA
# libraries, and metron-exec must link libtorch (the control: it shows the check can fail).
#   cmake -DREADELF=... -DPROGRAM=metron -DEXECUTOR=metron-exec -P check_needed_libraries.cmake
function(needed_of file out)
  execute_process(COMMAND "${READELF}" -d "${file}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed (${rc})")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]*\\]" needed "${dynamic}")
  set(${out} "${needed}" PARENT_SCOPE)
endfunction()

set(heavy "libtorch|libc10|libgloo|libcudart|libcublas|libnccl")
needed_of("${PROGRAM}" program_needs)
foreach(line IN LISTS program_needs)
  if(line MATCHES "${heavy}")
    message(FATAL_ERROR "${PROGRAM} needs ${line}: it would load the executor's libraries at "
                        "every start")
  endif()
endforeach()
needed_of("${EXECUTOR}" executor_needs)
if(NOT executor_needs MATCHES "libtorch")
  message(FATAL_ERROR "${EXECUTOR} does not need libtorch (its NEEDED: ${executor_needs})")
endif()
list(LENGTH program_needs count)
message(STATUS "${PROGRAM}: ${count} libraries, none of the executor's")
