# Decides whether the CUDA backend is built: only when METRON_ENABLE_CUDA is on and CMake finds
# both nvcc and the toolkit. Otherwise it says why, once, and the build goes on without CUDA.
set(METRON_HAVE_CUDA OFF)
if(METRON_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  # check_language() trusts a CMAKE_CUDA_COMPILER given on the command line without looking at
  # it, and enable_language() would then fail the whole configure: check that it exists.
  set(_metron_cuda_compiler_ok OFF)
  if(CMAKE_CUDA_COMPILER)
    find_program(_metron_cuda_compiler_path NAMES "${CMAKE_CUDA_COMPILER}" NO_CACHE)
    if(_metron_cuda_compiler_path)
      set(_metron_cuda_compiler_ok ON)
    else()
      message(STATUS "metron: CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} does not exist")
    endif()
  endif()
  find_package(CUDAToolkit QUIET)
  if(_metron_cuda_compiler_ok AND CUDAToolkit_FOUND)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # No GPU to detect on build machines: name the data-centre generations metron targets
      # (A100, H100). CUDA 13 no longer accepts architectures older than sm_75.
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 flag for nvcc (3.26 learnt it), so CUDA_STANDARD 20 would fail
    # to generate. nvcc >= 12 accepts -std=c++20: teach CMake the spelling, nothing more.
    if(CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12
       AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    find_package(NCCL)
    if(NCCL_FOUND)
      set(METRON_HAVE_CUDA ON)
      message(STATUS "metron: CUDA backend enabled (CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_VERSION})")
    else()
      message(STATUS "metron: CUDA backend skipped: CUDA toolkit found but NCCL was not "
                     "(set NCCL_ROOT to the folder that holds include/nccl.h)")
    endif()
  else()
    message(STATUS "metron: CUDA backend skipped: no usable nvcc or CUDA toolkit (nvcc not on PATH and "
                   "CUDAToolkit_ROOT not set); the CPU backend is always built")
  endif()
else()
  message(STATUS "metron: CUDA backend skipped: METRON_ENABLE_CUDA is OFF")
endif()
